"""The informer factory: one informer per (resource, namespaces, selector, transform), the
second caller's indexes added to the shared store."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from cre.core.common.projections import node_view, pod_view
from cre.kube.client import NODES, PODS
from cre.kube.factory import InformerFactory
from cre.kube.metrics import metrics_for
from cre.kube.pods import INDEX_JOB, launcher_pod_informer, worker_pod_informer
from cre.kube.store import Store


def _factory(namespaces: list[str] | None = None) -> InformerFactory:
    client: Any = object()  # nothing is listed: the informers are never run here
    return InformerFactory(client, namespaces=namespaces,
                           metrics=metrics_for(CollectorRegistry()))


def _raw(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def test_the_same_query_is_one_informer() -> None:
    """Asking twice for the same resource, selector and transform returns the same informer;
    another selector or another transform is another informer."""
    f = _factory()
    gpu = f.informer(NODES, transform=node_view, label_selector="gpu=true", name="a")
    assert f.informer(NODES, transform=node_view, label_selector="gpu=true", name="b") is gpu
    assert gpu.name == "a"
    assert f.informer(NODES, transform=node_view, label_selector="other=true") is not gpu
    assert f.informer(NODES, transform=_raw, label_selector="gpu=true") is not gpu
    assert len(f.informers) == 3


def test_the_pod_caches_stay_two_and_are_shared() -> None:
    """The worker and launcher caches are two informers, each handed to every caller, in the
    factory's namespaces."""
    f = _factory(["team-a"])
    workers, launchers = worker_pod_informer(f), launcher_pod_informer(f)
    assert workers is not launchers
    assert worker_pod_informer(f) is workers and launcher_pod_informer(f) is launchers
    assert workers.resource == PODS and list(workers.states) == ["team-a"]


def test_cluster_scoped_resources_ignore_the_namespaces() -> None:
    """Nodes are watched cluster-wide even from a namespaced factory."""
    nodes = _factory(["team-a"]).informer(NODES, transform=node_view)
    assert list(nodes.states) == [None]


def test_a_second_caller_adds_its_indexes_over_the_stored_objects() -> None:
    """An index asked for after objects were stored indexes them; a name already indexed keeps
    its first function."""
    store: Store[dict[str, str]] = Store(indexers={"a": lambda o: [o["a"]]})
    store._put("ns/x", {"a": "1", "b": "2"}, "1")
    store.add_indexers({"b": lambda o: [o["b"]], "a": lambda o: ["never"]})
    assert store.by_index("b", "2") == ({"a": "1", "b": "2"},)
    assert store.by_index("a", "1") == ({"a": "1", "b": "2"},)
    store._put("ns/y", {"a": "3", "b": "2"}, "2")
    assert len(store.by_index("b", "2")) == 2


def test_indexers_reach_a_shared_informer() -> None:
    """The Job index of the worker cache is there whoever asked first."""
    f = _factory()
    plain = f.informer(PODS, transform=pod_view, label_selector="cre.dev/job",
                       caller="cre.kube.pods.worker_pod_informer")
    assert worker_pod_informer(f) is plain
    assert plain.store.by_index(INDEX_JOB, "ns/j") == ()

