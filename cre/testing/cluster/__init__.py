"""cre.testing.cluster."""
