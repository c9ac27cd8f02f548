"""cre.kube."""
