"""Per-node certification gauges, fed by whatever knows node results.

The NodeCertification controller feeds it (docs/design/021, amended): each record's categories
under its own source key (:func:`cre.core.certification.nodestate.record_results`) and each
unfinished Certification's running groups as Testing. Each source's results replace its
previous ones; the gauges show :func:`fleet_view` of all sources (per node and category, the
most recent result wins), and a (node, category) no source reports any more loses its series,
so a deleted record leaves no stale series.

* ``cre_node_certification_state{node,category}``: 0 Uncertified, 1 Passed, 2 Failed,
  3 Testing, 4 Expired (:class:`NodeState`);
* ``cre_node_last_pass_timestamp_seconds{node,category}``: Unix time of the last pass (absent
  until one), so ``time() - ...`` is the seconds since it;
* ``cre_node_bus_bandwidth_gbps{node,category}``: the busBW the node's group last measured
  (absent for a category that measures none).

Cardinality: at most one series of each per GPU node and catalog category in use
(``category`` is ``<domain>/<variant>``), whatever the number of Certifications.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from cre.core.certification.nodestate import NodeResult, fleet_view


class NodeMetrics:
    """The per-node gauges of one registry (use :func:`node_metrics_for`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["node", "category"]
        self.state = Gauge("cre_node_certification_state",
                           "Certification state of a node in a category: 0 Uncertified, "
                           "1 Passed, 2 Failed, 3 Testing, 4 Expired", labels,
                           registry=registry)
        self.last_pass = Gauge("cre_node_last_pass_timestamp_seconds",
                               "Unix time a node last passed a category", labels,
                               registry=registry)
        self.bus_bandwidth = Gauge("cre_node_bus_bandwidth_gbps",
                                   "Bus bandwidth (GB/s) a node's group last measured in a "
                                   "category", labels, registry=registry)
        self._sources: dict[str, tuple[NodeResult, ...]] = {}
        self._shown: dict[tuple[str, str], NodeResult] = {}

    def publish(self, source: str, results: Iterable[NodeResult]) -> None:
        """``source``'s results now are ``results`` (they replace its earlier ones)."""
        held = tuple(results)
        if self._sources.get(source, ()) == held:
            return
        if held:
            self._sources[source] = held
        else:
            del self._sources[source]
        self._refresh()

    def forget(self, source: str) -> None:
        """``source`` is gone: its results no longer count."""
        if self._sources.pop(source, None) is not None:
            self._refresh()

    def _refresh(self) -> None:
        view = fleet_view(self._sources)
        for key in self._shown.keys() - view.keys():
            for gauge in (self.state, self.last_pass, self.bus_bandwidth):
                with contextlib.suppress(KeyError):
                    gauge.remove(*key)
        for key, r in view.items():
            if self._shown.get(key) == r:
                continue
            self.state.labels(*key).set(int(r.state))
            self._set(self.last_pass, key,
                      r.last_pass.timestamp() if r.last_pass is not None else None)
            self._set(self.bus_bandwidth, key, r.bus_bandwidth_gbps)
        self._shown = view

    @staticmethod
    def _set(gauge: Gauge, key: tuple[str, str], value: float | None) -> None:
        if value is None:
            with contextlib.suppress(KeyError):
                gauge.remove(*key)
        else:
            gauge.labels(*key).set(value)


_BY_REGISTRY: dict[int, tuple[CollectorRegistry, NodeMetrics]] = {}


def node_metrics_for(registry: CollectorRegistry | None = None) -> NodeMetrics:
    """The per-node gauges of ``registry`` (default: prometheus-client's default registry),
    created the first time they are asked for."""
    reg = REGISTRY if registry is None else registry
    held = _BY_REGISTRY.get(id(reg))
    if held is None or held[0] is not reg:
        held = (reg, NodeMetrics(reg))
        _BY_REGISTRY[id(reg)] = held
    return held[1]
