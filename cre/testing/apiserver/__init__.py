"""cre.testing.apiserver."""
