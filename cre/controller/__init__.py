"""cre.controller."""
