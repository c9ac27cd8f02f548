"""cre.testing.golden."""
