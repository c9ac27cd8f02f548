"""cre.testing."""
