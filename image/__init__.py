"""Build, run and inspect the cre-manager container image (``python -m image``)."""
