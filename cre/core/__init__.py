"""cre.core."""
