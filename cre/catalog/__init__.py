"""cre.catalog."""
