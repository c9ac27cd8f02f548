"""cre.render."""
