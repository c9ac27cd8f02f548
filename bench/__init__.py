"""Benchmarks: each module ``bench.<name>`` has ``main() -> None`` printing one JSON document."""
