"""Garbage-collector pause metrics and the post-sync heap freeze (cre_manager.gcstats)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from cre_manager.gcstats import freeze_heap, install_pause_metrics


def _collections(generation: int) -> float:
    return REGISTRY.get_sample_value("cre_gc_pause_seconds_count",
                                     {"generation": str(generation)}) or 0.0


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Leaves the test process's heap unfrozen afterwards."""
    yield
    gc.unfreeze()


def test_every_collection_is_timed() -> None:
    """After install_pause_metrics (twice: idempotent) each collection adds one observation."""
    install_pause_metrics()
    install_pause_metrics()
    before = _collections(2)
    gc.collect()
    assert _collections(2) == before + 1
    sum_ = REGISTRY.get_sample_value("cre_gc_pause_seconds_sum", {"generation": "2"})
    assert sum_ is not None and sum_ > 0


def test_freeze_heap_moves_live_objects_out_of_collections(unfrozen: None) -> None:
    """freeze_heap leaves the tracked objects in the permanent generation, not collected again."""
    survivors = [[i] for i in range(1000)]
    frozen = freeze_heap()
    assert frozen == gc.get_freeze_count() >= len(survivors)
    assert not any(o is survivors for o in gc.get_objects())
