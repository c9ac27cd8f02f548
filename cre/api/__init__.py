"""cre.api."""
