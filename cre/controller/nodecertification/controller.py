"""The NodeCertification controller: a terminal Certification's per-node results, folded into
one ``NodeCertification`` per node, and the opt-in node labels and taint.

It reconciles Certifications (keyed ``namespace/name``, as the Certification controller) and
reads, from caches shared with the tier controllers: the Certification's Workflows, their
node-result ConfigMaps (a ConfigMap's arrival wakes its Certification, which waits for every
one it references), the GPU nodes and the NodeCertifications. One reconcile runs
:func:`cre.core.nodecertification.reconcile.reconcile_nodecertification` and writes, per node:
the record's create (when there is none), its status (``/status``, guarded by the record's
resourceVersion) and the Node's JSON patch (guarded by the Node's resourceVersion, touching only
CRE's labels and taint). A conflict on either raises: the key backs off and the next pass
decides again from the caches.

Why not the one :class:`cre.kube.executor.PlanExecutor`: it applies a plan about one owner
(creates it controls, the owner's own status). Here one Certification writes the records of
many nodes and patches Nodes, none of them its children (docs/design/020).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Final

import anyio
import attrs
from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.conditions import GroupPhase
from cre.api.converter import structure, to_dict
from cre.api.nodecertification import NodeCertification, NodeCertificationSpec
from cre.api.workflow import Workflow
from cre.controller.certification.controller import (
    INDEX_CERTIFICATION,
    certification_from_dict,
    certification_index,
    involved_certification,
)
from cre.controller.certification.nodemetrics import node_metrics_for
from cre.controller.job.events import node_changed
from cre.controller.workflow.shell import Owned, configmap_view, workflow_from_dict
from cre.core.certification.nodestate import record_results, under_test_results
from cre.core.common.observed import NodeView
from cre.core.common.plan import EventSpec
from cre.core.common.projections import node_view
from cre.core.nodecertification.expiry import expiry_due, reconcile_expiry
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    NodeCertificationPlan,
    NodeWrite,
    ended_at,
    reconcile_nodecertification,
)
from cre.kube.client import (
    CERTIFICATIONS,
    CONFIGMAPS,
    JSON_PATCH,
    NODECERTIFICATIONS,
    NODES,
    WORKFLOWS,
    ApiError,
    KubeClient,
)
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import (
    DONE,
    CoreReconciler,
    KeyQueue,
    Result,
    WatchEvent,
    enqueue_by_label,
    enqueue_mapped,
)
from cre.kube.runtime.base import utcnow

log = logging.getLogger(__name__)

#: Nodes whose writes one fold applies at once: a run of hundreds of nodes is a create, a
#: status write and a node patch per node, which one at a time outlasted a 10m schedule
#: interval at 1,000 nodes (bench fleet).
WRITE_CONCURRENCY: Final = 16

# A Node changed under a planned patch: look again after the rate limiter's backoff, once the
# node cache has the newer copy (no error is logged or counted).
STALE_NODE: Final = Result(requeue=True)

CONTROLLER: Final = "nodecertification"
COMPONENT: Final = "cre.dev/nodecertification-controller"
#: The key of the pass over every record that time alone changes (a pass expiring): no
#: Certification's key (those are ``namespace/name``).
EXPIRY_KEY: Final = ":expiry"


_HELD_BACK: dict[int, tuple[CollectorRegistry, Gauge]] = {}


def held_back_gauge(registry: CollectorRegistry | None = None) -> Gauge:
    """``cre_node_taints_held_back{namespace,certification}`` on ``registry`` (default:
    prometheus-client's), created on first use: failed nodes the blast-radius breaker kept from
    being tainted."""
    reg = REGISTRY if registry is None else registry
    held = _HELD_BACK.get(id(reg))
    if held is None or held[0] is not reg:
        held = (reg, Gauge("cre_node_taints_held_back",
                           "Failed nodes the blast-radius breaker kept from being tainted",
                           ["namespace", "certification"], registry=reg))
        _HELD_BACK[id(reg)] = held
    return held[1]


def nodecertification_from_dict(raw: dict[str, Any]) -> NodeCertification:
    """The NodeCertification model of a served object."""
    return structure(raw, NodeCertification)


class NodeCertificationController(CoreReconciler[Certification, NodeCertificationObservation,
                                                 Any]):
    """Folds every ended Certification into the NodeCertifications of the nodes it judged."""

    def __init__(self, client: KubeClient, *, informers: InformerFactory | None = None,
                 max_concurrent_reconciles: int = 1, clock: Callable[[], datetime] = utcnow,
                 registry: CollectorRegistry | None = None, time_scale: float = 1.0) -> None:
        """``informers``: the process's shared informer factory. One worker by default: two
        Certifications ending together would otherwise race for the same records.
        ``time_scale``: how many ``clock`` seconds pass per wall second (a simulated clock);
        the next expiry is waited for in wall seconds."""
        super().__init__(client, name=CONTROLLER, component=COMPONENT,
                         workers=max_concurrent_reconciles, clock=clock, informers=informers,
                         namespaces=None, registry=registry, time_scale=time_scale)
        self.certifications: Informer[Certification] = self.cache(
            CERTIFICATIONS, transform=certification_from_dict, name="cre-certifications")
        self.workflows: Informer[Workflow] = self.cache(
            WORKFLOWS, transform=workflow_from_dict, label_selector=L.CERTIFICATION,
            indexers={INDEX_CERTIFICATION: certification_index},
            name="certification-workflows")
        self.configmaps: Informer[Owned] = self.cache(
            CONFIGMAPS, transform=configmap_view, label_selector=L.WORKFLOW,
            name="workflow-configmaps")
        self.records: Informer[NodeCertification] = self.cache(
            NODECERTIFICATIONS, transform=nodecertification_from_dict,
            name="cre-nodecertifications")
        self.nodes: Informer[NodeView] = self.cache(
            NODES, transform=node_view, label_selector=f"{L.GPU_PRESENT}=true",
            name="gpu-nodes")
        self.held_back = held_back_gauge(registry)
        self.node_metrics = node_metrics_for(registry)
        self._announced: dict[str, tuple[str, ...]] = {}
        # When the expiry pass next looks (its last requeue); a record event enqueues the pass
        # only when the record is due before that, not on every write of a large fold.
        self._next_expiry: datetime | None = None
        (self.managed().for_(self.certifications, on_deleted=self._forget)
            .watches(self.workflows, enqueue_by_label(L.CERTIFICATION))
            .watches(self.configmaps, enqueue_mapped(self._certification_of))
            .watches(self.records, self._on_record)
            .watches(self.nodes, enqueue_mapped(self._last_of_node), node_changed))

    def _on_record(self, event: WatchEvent[NodeCertification], queue: KeyQueue) -> None:
        """A record changed: its node gauges follow it (its series go with it), the
        Certification folded in last is enqueued (a record deleted by hand is written again)
        and so is the expiry pass when the record is due before the pass's next look."""
        record = event.obj
        source = f"record:{record.metadata.name or ''}"
        now = self._clock()
        if event.new is None:
            self.node_metrics.forget(source)
        else:
            self.node_metrics.publish(source, record_results(record, now))
        ref = record.status.last_certification
        if ref is not None:
            queue.add(f"{ref.namespace}/{ref.name}")
        due = expiry_due(record, now) if event.new is not None else None
        if due is not None and (self._next_expiry is None or due < self._next_expiry):
            queue.add(EXPIRY_KEY)

    def _last_of_node(self, event: WatchEvent[NodeView]) -> Iterable[str]:
        """The Certification folded last into the node's record (labels or taints changed
        by hand are put back as the record says)."""
        record = self.records.store.get(event.obj.name)
        ref = record.status.last_certification if record is not None else None
        if ref is not None:
            yield f"{ref.namespace}/{ref.name}"

    def _certification_of(self, event: WatchEvent[Owned]) -> Iterable[str]:
        """The Certification whose Workflow holds the result ConfigMap."""
        cm = event.obj
        if cm.binary is None:
            return
        wf = self.workflows.store.get(f"{cm.namespace}/{cm.workflow}")
        cert = wf.metadata.labels.get(L.CERTIFICATION) if wf is not None else None
        if cert:
            yield f"{cm.namespace}/{cert}"

    def observe(self, cert: Certification) -> NodeCertificationObservation:
        """The Observation of ``cert`` from the caches."""
        ns = cert.metadata.namespace or ""
        workflows = self.workflows.store.by_index(INDEX_CERTIFICATION,
                                                  f"{ns}/{cert.metadata.name or ''}")
        wanted = {ref.name for cs in cert.status.category_statuses
                  for ref in (cs.succeeded_nodes_ref, cs.failed_nodes_ref,
                              cs.uncertified_nodes_ref) if ref is not None}
        results = {}
        for name in sorted(wanted):
            cm = self.configmaps.store.get(f"{ns}/{name}")
            if cm is not None and cm.binary is not None:
                results[name] = cm.binary
        under_test = frozenset(n for wf in self.workflows.store.list()
                               for g in wf.status.groups if g.phase == GroupPhase.RUNNING
                               for n in g.nodes)
        return NodeCertificationObservation(
            workflows={wf.metadata.name or "": wf for wf in workflows}, results=results,
            records=self._records(), nodes=self._nodes(), under_test=under_test)

    async def reconcile(self, key: str) -> Result:
        """Fold the Certification ``namespace/name`` into its nodes' records; for
        :data:`EXPIRY_KEY`, bring every record to now and come back at the next expiry."""
        if key == EXPIRY_KEY:
            now = self._clock()
            self._next_expiry = None  # until this pass succeeds, every due record wakes it
            plan = reconcile_expiry(self._records(), self._nodes(), now)
            if not await self._apply_all(plan):
                return STALE_NODE
            if plan.requeue_after is not None:
                self._next_expiry = now + timedelta(seconds=plan.requeue_after)
            return self.requeue(plan.requeue_after)
        cert = self.certifications.store.get(key)
        if cert is None:
            return DONE
        obs = self.observe(cert)
        plan = reconcile_nodecertification(cert, obs, self._clock())
        if not await self._apply_all(plan):
            return STALE_NODE
        await self._breaker(cert, plan)
        if ended_at(cert) is None and cert.metadata.deletion_timestamp is None:
            self.node_metrics.publish(f"certification:{key}",
                                      under_test_results(cert, obs.workflows))
        else:
            self.node_metrics.forget(f"certification:{key}")
        return DONE

    def _records(self) -> dict[str, NodeCertification]:
        return {r.metadata.name or "": r for r in self.records.store.list()}

    def _nodes(self) -> dict[str, NodeView]:
        return {n.name: n for n in self.nodes.store.list()}

    async def _apply_all(self, plan: NodeCertificationPlan) -> bool:
        """Apply ``plan``'s writes, up to :data:`WRITE_CONCURRENCY` nodes at once (each node's
        own writes in order: record, status, node patch); False when a Node changed since the
        copy its patch was decided on (the next pass plans again from fresher caches). The
        first error of any node is raised once the others have finished."""
        if len(plan.writes) <= 1:
            return all([await self._apply(w) for w in plan.writes])
        limiter = anyio.CapacityLimiter(WRITE_CONCURRENCY)
        stale: list[str] = []
        errors: list[Exception] = []

        async def one(write: NodeWrite) -> None:
            async with limiter:
                if errors:
                    return  # a write failed: the rest waits for the next pass
                try:
                    if not await self._apply(write):
                        stale.append(write.node)
                except Exception as exc:  # re-raised below, outside the task group
                    errors.append(exc)

        async with anyio.create_task_group() as tg:
            for write in plan.writes:
                tg.start_soon(one, write)
        if errors:
            raise errors[0]
        return not stale

    async def _emit(self, node: str, uid: str | None, events: Iterable[EventSpec]) -> None:
        """The events about the record of ``node`` (each write they describe succeeded)."""
        for event in events:
            await self.recorder.emit(
                involved={"apiVersion": L.API_VERSION, "kind": "NodeCertification",
                          "name": node, "uid": uid},
                type_=event.type, reason=event.reason, message=event.message)

    async def _breaker(self, cert: Certification, plan: NodeCertificationPlan) -> None:
        """The Certification's ``NodeTaintsHeldBack`` condition (its status replaced over the
        cached resourceVersion: a conflict raises and the key backs off), the gauge of nodes
        held back, and one Warning event each time the set changes."""
        ns, name = cert.metadata.namespace or "", cert.metadata.name or ""
        held = plan.held_back
        if plan.conditions is not None:
            body = to_dict(attrs.evolve(cert, status=attrs.evolve(
                cert.status, conditions=plan.conditions)))
            await self.client.replace(CERTIFICATIONS, body, subresource="status")
        self.held_back.labels(namespace=ns, certification=name).set(len(held))
        if held and self._announced.get(f"{ns}/{name}") != held:
            await self.recorder.emit(
                involved=involved_certification(cert), type_="Warning",
                reason="NodeTaintsHeldBack",
                message=f"the blast-radius breaker kept {len(held)} failed node(s) from being "
                        f"tainted (spec.nodeState.maxTainted/maxTaintedPercent): "
                        f"{', '.join(held[:20])}{' ...' if len(held) > 20 else ''}")
        self._announced[f"{ns}/{name}"] = held

    def _forget(self, cert: Certification) -> None:
        ns, name = cert.metadata.namespace or "", cert.metadata.name or ""
        self._announced.pop(f"{ns}/{name}", None)
        self.node_metrics.forget(f"certification:{ns}/{name}")
        with contextlib.suppress(KeyError):
            self.held_back.remove(ns, name)

    async def _apply(self, write: NodeWrite) -> bool:
        rv = write.resource_version
        record = self.records.store.get(write.node)
        uid = record.metadata.uid if record is not None else None
        if write.create is not None:
            created = await self.client.create(NODECERTIFICATIONS, dict(write.create))
            rv = str(created["metadata"]["resourceVersion"])
            uid = str(created["metadata"].get("uid") or "") or None
        if write.status is not None:
            body = to_dict(NodeCertification(spec=NodeCertificationSpec(node_name=write.node),
                                             status=write.status))
            body["metadata"] = {"name": write.node, "resourceVersion": rv}
            await self.client.replace(NODECERTIFICATIONS, body, subresource="status")
            log.info("node %s: %s (%s)", write.node, write.status.state,
                     write.status.categories_passed)
            await self._emit(write.node, uid, write.events)
        if write.node_patch:
            try:
                await self.client.patch(NODES, write.node, list(write.node_patch),
                                        content_type=JSON_PATCH)
            except ApiError as exc:
                # The patch's first operation tests the Node's resourceVersion: the API server
                # answers a failed test with 422 (the patch cannot be applied). The Node moved
                # on; not an error, plan again from its newer copy.
                if exc.status != 422:
                    raise
                log.debug("node %s changed since its patch was planned (%s); planning again",
                          write.node, exc)
                return False
            await self._emit(write.node, uid, write.patch_events)
        return True
