"""No Certification spec field is silently ignored: each one changes the Workflow a category
builds (the rendered Job, TrainingRuntime and orchestration) or what discovery decides.

The table below holds, per field path of ``CertificationSpec`` (the attrs model walked
recursively, camelCase as on the wire), an example value and where it must show. A field added
to the model without an entry fails :func:`test_every_spec_field_has_an_entry`; an entry whose
value changes nothing, or shows elsewhere, fails :func:`test_each_field_changes_what_is_built`.
Objects handed down whole to the Workflow (``target``, ``gangScheduler``, ``failurePolicy``,
``nodeHealthMonitor``, ``imagePullSecrets`` items, ``relativeThreshold``) are one entry each:
the lower tier's own tests cover their fields. ``deadline`` is not part of the Workflow body
``build_workflow`` makes: the Certification core hands each Workflow what is left of it at
creation, so its entry checks the time left (``deadline_left``) instead. ``nodeState`` acts
once the run ended, on the nodes' records and labels: its entries check what the
NodeCertification core writes for the ended Certification (``node_writes``).
"""

from __future__ import annotations

import copy
import datetime as dt
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import pytest

from cre.api.certification import Certification, CertificationSpec
from cre.api.common import GangSchedulerSpec, RelativeThreshold, TargetSpec
from cre.api.converter import from_dict, to_dict
from cre.api.failurepolicy import FailurePolicy
from cre.api.job import NodeHealthMonitor
from cre.api.meta import LocalObjectReference
from cre.api.nodecertification import NodeStatePolicy
from cre.core.certification.build import BuildError, build_workflow, discover_for
from cre.core.certification.reconcile import deadline_left
from cre.core.nodecertification.nodestate import STATE_LABEL, TAINT_KEY
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    NodeWrite,
    reconcile_nodecertification,
)
from cre.core.workflow.discovery import DiscoveryFailure
from tests.core.nodecertworld import broken, ended, gpu_nodes, later, results
from tests.core.tierworld import catalog, certification, nodes

#: Handed to the Workflow as a whole (not walked into).
WHOLE: frozenset[type] = frozenset({TargetSpec, GangSchedulerSpec, FailurePolicy,
                                    LocalObjectReference, NodeHealthMonitor, RelativeThreshold})
NODES = nodes(4)

Built = Mapping[str, Any]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _inner(tp: Any) -> Any:
    """The attrs class inside ``X | None`` / ``tuple[X, ...]`` (else ``tp``)."""
    args = [a for a in typing.get_args(tp) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(tp) in (typing.Union, types.UnionType, tuple) and len(args) == 1:
        return _inner(args[0])
    return tp


def field_paths(cls: type, prefix: str = "") -> Iterator[str]:
    """Every field path of ``cls``, leaves and WHOLE objects, in declaration order."""
    for f in attrs.fields(attrs.resolve_types(cls)):
        path = f"{prefix}{_camel(f.name)}"
        inner = _inner(f.type)
        if attrs.has(inner) and inner not in WHOLE:
            yield from field_paths(inner, f"{path}.")
        else:
            yield path


def _runtime(wf: Built) -> Mapping[str, Any]:
    return next(d for d in wf["spec"]["dependencies"] if d["kind"] == "TrainingRuntime")


def _pods(wf: Built) -> list[Mapping[str, Any]]:
    jobs = _runtime(wf)["spec"]["template"]["spec"]["replicatedJobs"]
    return [j["template"]["spec"]["template"]["spec"] for j in jobs]


def _main(wf: Built) -> Mapping[str, Any]:
    """The main container of the node (worker) pods."""
    jobs = _runtime(wf)["spec"]["template"]["spec"]["replicatedJobs"]
    node = next(j for j in jobs if j["name"] == "node")
    return node["template"]["spec"]["template"]["spec"]["containers"][0]


def _job(wf: Built) -> Mapping[str, Any]:
    return wf["spec"]["jobTemplate"]["spec"]


def _args(wf: Built) -> list[str]:
    return list(_job(wf)["workload"]["trainJob"]["trainer"]["args"])


def _after(flag: str) -> Callable[[Built], str]:
    """The nccl-tests argument after ``flag`` (its last use: mpirun takes ``-N`` too)."""
    def value(wf: Built) -> str:
        args = _args(wf)
        return args[len(args) - 1 - args[::-1].index(flag) + 1]
    return value


@attrs.frozen
class Case:
    """``value`` set at the field's path; ``shows(built)`` must hold on what is built then."""

    value: Any
    shows: Callable[[Any], bool]
    entry: tuple[str, str] = ("communication", "nccl-all-reduce")
    #: What to compute from the Certification instead of the Workflow body it builds.
    via: Callable[[Certification], Any] | None = None
    #: Other spec fields the field needs to act (set on the base too), e.g. enableCheckpoint.
    extra: Mapping[str, Any] = attrs.field(factory=dict)


GANG = {"schedulerName": "kai-scheduler", "queue": "q1"}
CREATED = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def _time_left(cert: Certification) -> dt.timedelta | None:
    """The deadline left one minute after the Certification was created."""
    made = attrs.evolve(cert, metadata=attrs.evolve(cert.metadata, creation_timestamp=CREATED))
    return deadline_left(made, CREATED + dt.timedelta(minutes=1))


def node_writes(cert: Certification) -> dict[str, NodeWrite]:
    """What the NodeCertification core writes, per node, once ``cert`` ended with gpu-00
    passed and gpu-01 failed."""
    done = attrs.evolve(ended(node_state={}), spec=cert.spec)
    obs = NodeCertificationObservation(
        results=results(passed=["gpu-00"], failed=[broken("gpu-01")]),
        nodes=gpu_nodes("gpu-00", "gpu-01"))
    return {w.node: w for w in reconcile_nodecertification(done, obs, later(5)).writes}


def tainting_writes(cert: Certification) -> dict[str, NodeWrite]:
    """:func:`node_writes` with the taint opted in (a breaker cap shows only on a taint)."""
    policy = cert.spec.node_state or NodeStatePolicy()
    return node_writes(attrs.evolve(cert, spec=attrs.evolve(
        cert.spec, node_state=attrs.evolve(policy, taint=True))))


def _ops(write: NodeWrite) -> str:
    return str(write.node_patch)


TRAINING = ("training", "nemotron5-8b")
CHECKPOINTING = {"enableCheckpoint": True}
DIAGNOSING = {"testScale": "diagnose"}


def _pvc(wf: Built) -> Mapping[str, Any]:
    return next(d for d in wf["spec"]["dependencies"] if d["kind"] == "PersistentVolumeClaim")


def _checkpointed(wf: Built) -> bool:
    """The PVC is a dependency, mounted by the trainer, named by the Job's checkpoint, and
    the entry's save / load arguments are on the command."""
    claim = _pvc(wf)["metadata"]["name"]
    return (_job(wf)["checkpoint"]["pvcName"] == claim
            and {"name": "checkpoint", "mountPath": "/checkpoint"} in _main(wf)["volumeMounts"]
            and _after("--save")(wf) == "/checkpoint" and _after("--load")(wf) == "/checkpoint")


CASES: dict[str, Case] = {
    "nodesPerJob": Case(2, lambda wf: _job(wf)["workload"]["trainJob"]["trainer"]["numNodes"]
                        == 2),
    "startupStallTimeoutSeconds": Case(
        123, lambda wf: _job(wf)["startupStallTimeoutSeconds"] == 123),
    # Discovery keeps only nodes with this many GPUs: none of the 8-GPU nodes.
    "gpusPerNode": Case(16, lambda found: isinstance(found, DiscoveryFailure)),
    "nicResourceName": Case("example.com/nic", lambda wf: "example.com/nic" in str(_main(wf)),
                            entry=("communication", "nccl-all-reduce")),
    "resources.limits.cpu": Case("6", lambda wf: _main(wf)["resources"]["limits"]["cpu"]
                                 == "6"),
    "resources.limits.memory": Case("48Gi", lambda wf: _main(wf)["resources"]["limits"]
                                    ["memory"] == "48Gi"),
    "resources.requests.cpu": Case("4", lambda wf: _main(wf)["resources"]["requests"]["cpu"]
                                   == "4"),
    "resources.requests.memory": Case("32Gi", lambda wf: _main(wf)["resources"]["requests"]
                                      ["memory"] == "32Gi"),
    "image": Case("registry.example.com/nccl:1",
                  lambda wf: _main(wf)["image"] == "registry.example.com/nccl:1"),
    "imagePullSecrets": Case([{"name": "regcred"}], lambda wf: all(
        p.get("imagePullSecrets") == [{"name": "regcred"}] for p in _pods(wf))),
    # Launcher and worker pods alike (so real work preempts any of them).
    "priorityClassName": Case("cre-certification-low", lambda wf: len(_pods(wf)) == 2 and all(
        p.get("priorityClassName") == "cre-certification-low" for p in _pods(wf))),
    "repeatCount": Case(3, lambda wf: wf["spec"]["orchestration"]["iterations"] == 3),
    "testScale": Case("intra-node", lambda wf: _job(wf)["workload"]["trainJob"]["trainer"]
                      ["numNodes"] == 1),
    "minGroupSize": Case(3, lambda wf: wf["spec"]["orchestration"]["diagnose"]
                         ["minGroupSize"] == 3, extra=DIAGNOSING),
    "topologyKey": Case("example.com/rack", lambda wf: wf["spec"]["orchestration"]
                        ["diagnose"]["topologyKey"] == "example.com/rack", extra=DIAGNOSING),
    "maxBytes": Case("1G", lambda wf: _after("-e")(wf) == "1G"),
    "numIterations": Case(7, lambda wf: _after("-n")(wf) == "7"),
    "numCycles": Case(3, lambda wf: _after("-N")(wf) == "3"),
    "thresholds": Case({"busBandwidthGBps": "value >= 1"}, lambda wf: wf["spec"]["validation"]
                       ["performance"]["thresholds"]["thresholds"]
                       == {"busBandwidthGBps": "value >= 1"}),
    "relativeThreshold": Case({"percent": 70, "action": "Fail", "scope": "Group"},
                              lambda wf: wf["spec"]["validation"]["performance"]
                              ["relativeThreshold"] == {"percent": 70, "minPeers": 4,
                                                        "action": "Fail", "scope": "Group"}),
    "maxConcurrent": Case(2, lambda wf: wf["spec"]["orchestration"]["execution"]
                          ["maxConcurrent"] == 2),
    "timeoutPerJob": Case("7m", lambda wf: wf["spec"]["orchestration"]["execution"]
                          ["timeoutPerJob"] == "7m"),
    "measurementTimeout": Case("9m", lambda wf: wf["spec"]["validation"]["performance"]
                               ["measurementTimeout"] == "9m"),
    "workloadMetadata.labels": Case({"team": "infra"}, lambda wf: _job(wf)["workloadMetadata"]
                                    ["labels"]["team"] == "infra"),
    "failurePolicy": Case({"infraScopedFailFast": False},
                          lambda wf: wf["spec"]["failurePolicy"]["infraScopedFailFast"]
                          is False),
    "target": Case({"nodeNames": ["gpu-00", "gpu-01"]},
                   lambda wf: wf["spec"]["orchestration"]["target"]["nodeNames"]
                   == ["gpu-00", "gpu-01"]),
    "schedulingStallTimeout": Case("45m", lambda wf: _job(wf)["schedulingStallTimeout"]
                                   == "45m"),
    "imagePullGraceSeconds": Case(77, lambda wf: _job(wf)["imagePullGraceSeconds"] == 77),
    "categories.domain": Case("diagnostics", lambda wf: "diagnostics" in wf["metadata"]["name"],
                              entry=("diagnostics", "dcgm-level1")),
    "categories.variant": Case("nccl-all-gather",
                               lambda wf: wf["metadata"]["name"].endswith("nccl-all-gather"),
                               entry=("communication", "nccl-all-gather")),
    "nodeHealthMonitor": Case({"conditions": [{"type": "GpuUnhealthy"}]},
                              lambda wf: wf["spec"]["nodeHealthMonitor"]["conditions"][0]["type"]
                              == "GpuUnhealthy"),
    "maxNodes": Case(2, lambda wf: wf["spec"]["maxNodes"] == 2),
    "deadline": Case("10m", lambda left: left == dt.timedelta(minutes=9), via=_time_left),
    "nodeState.labels": Case(True, lambda w: "cre.dev~1certification" in _ops(w["gpu-00"])
                             and STATE_LABEL.replace("/", "~1") in _ops(w["gpu-01"]),
                             via=node_writes),
    "nodeState.taint": Case(True, lambda w: TAINT_KEY in _ops(w["gpu-01"])
                            and not w["gpu-00"].node_patch, via=node_writes),
    # Breaker caps: with the taint opted in and a cap of 0, the failed node is held back.
    "nodeState.maxTainted": Case(0, lambda w: not w["gpu-01"].node_patch,
                                 via=tainting_writes),
    "nodeState.maxTaintedPercent": Case(0, lambda w: not w["gpu-01"].node_patch,
                                        via=tainting_writes),
    "nodeState.validFor": Case("24h", lambda w: w["gpu-00"].status.valid_until
                               == ended().status.conditions[0].last_transition_time
                               + dt.timedelta(hours=24), via=node_writes),
    "enableCheckpoint": Case(True, _checkpointed, entry=TRAINING),
    "maxRestarts": Case(1, lambda wf: _job(wf)["checkpoint"]["maxRestarts"] == 1,
                        entry=TRAINING, extra=CHECKPOINTING),
    "storageSize": Case("1Ti", lambda wf: _pvc(wf)["spec"]["resources"]["requests"]
                        ["storage"] == "1Ti", entry=TRAINING, extra=CHECKPOINTING),
    "storageClassName": Case("fast", lambda wf: _pvc(wf)["spec"]["storageClassName"] == "fast",
                             entry=TRAINING, extra=CHECKPOINTING),
    "maxSteps": Case(20, lambda wf: _after("--train-iters")(wf) == "20", entry=TRAINING),
    "saveInterval": Case(5, lambda wf: _after("--save-interval")(wf) == "5", entry=TRAINING,
                         extra=CHECKPOINTING),
    "exitDurationMins": Case(7, lambda wf: _after("--exit-duration-in-mins")(wf) == "7",
                             entry=TRAINING),
    "gangScheduler": Case(GANG, lambda wf: wf["spec"]["gangScheduler"]["queue"] == "q1" and all(
        p.get("schedulerName") == "kai-scheduler" for p in _pods(wf))),
}
#: Field -> where the example goes, when not at the field's own path.
CATEGORY_OPTIONS = "categories.options."


def _set(spec: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        spec = spec.setdefault(part, {})
    spec[leaf] = value


def _build(spec_changes: Callable[[dict[str, Any]], None],
           entry: tuple[str, str], via: Callable[[Certification], Any] | None = None) -> Any:
    """The Workflow body category 0 builds (or the DiscoveryFailure / BuildError), or what
    ``via`` computes from the Certification."""
    body = to_dict(certification(entry))
    spec = copy.deepcopy(body["spec"])
    spec_changes(spec)
    body["spec"] = spec
    cert = from_dict(body)
    if via is not None:
        return via(cert)
    found = discover_for(cert, 0, NODES, catalog())
    if isinstance(found, DiscoveryFailure):
        return found
    try:
        return build_workflow(cert, 0, found=found, catalog=catalog())
    except BuildError as exc:
        return exc


def _case(path: str) -> Case:
    return CASES[path.removeprefix(CATEGORY_OPTIONS)]


def test_every_spec_field_has_an_entry() -> None:
    """Every field of CertificationSpec (category options included) is in the table, and the
    table names no field the model lacks."""
    paths = list(field_paths(CertificationSpec))
    missing = [p for p in paths if p.removeprefix(CATEGORY_OPTIONS) not in CASES]
    assert not missing, f"add a CASES entry (value -> what it changes) for {missing}"
    stale = set(CASES) - {p.removeprefix(CATEGORY_OPTIONS) for p in paths}
    assert not stale, f"CASES names fields the model no longer has: {sorted(stale)}"


@pytest.mark.parametrize("path", list(field_paths(CertificationSpec)))
def test_each_field_changes_what_is_built(path: str) -> None:
    """Setting the field (globally, or in the category's options for a category option)
    changes what the category builds, and shows where the table says."""
    case = _case(path)
    category_field = path.startswith("categories.") and not path.startswith(CATEGORY_OPTIONS)
    base_entry = ("communication", "nccl-all-reduce") if category_field else case.entry
    base = _build(lambda spec: spec.update(case.extra), base_entry, case.via)
    if path.startswith("categories."):
        field = path.removeprefix("categories.")

        def change(spec: dict[str, Any]) -> None:
            spec.update(case.extra)
            category = spec["categories"][0]
            if field.startswith("options."):
                _set(category, field, case.value)
            else:
                category.update(dict(zip(("domain", "variant"), case.entry, strict=True)))
    else:
        def change(spec: dict[str, Any]) -> None:
            spec.update(case.extra)
            _set(spec, path, case.value)
    built = _build(change, case.entry, case.via)
    assert not isinstance(built, BuildError), built
    assert built != base, f"{path}: {case.value!r} changed nothing"
    assert case.shows(built), f"{path}: {case.value!r} did not show where expected"


def test_checkpointing_an_entry_that_cannot_is_refused_before_anything_is_created() -> None:
    """enableCheckpoint on a category whose entry has no checkpoint settings is a precheck
    problem naming the field; on a training entry it is none, and the PVC is a dependency."""
    from cre.core.certification.build import precheck

    comm = certification(("communication", "nccl-all-reduce"), enableCheckpoint=True)
    assert precheck(comm, catalog()) == (
        "spec.categories[0].options.enableCheckpoint: communication/nccl-all-reduce does not "
        "checkpoint (only training entries do)",)
    train = certification(TRAINING, enableCheckpoint=True)
    assert precheck(train, catalog()) == ()
    found = discover_for(train, 0, NODES, catalog())
    assert not isinstance(found, DiscoveryFailure)
    pvc = _pvc(build_workflow(train, 0, found=found, catalog=catalog()))
    assert pvc["metadata"]["name"] == "cert-training-nemotron5-8b-checkpoint"
    assert pvc["spec"] == {"accessModes": ["ReadWriteMany"],
                           "resources": {"requests": {"storage": "10Ti"}}}


def test_training_options_reach_the_trainer_and_its_job() -> None:
    """On a training category, resources replace the entry's 64 CPU / 500Gi on the trainer
    container (GPUs and the platform's EFA devices kept), startupStallTimeoutSeconds
    replaces the entry's 1200, and the entry's stall multiplier and goodput measurement
    reach the Job."""
    plain = certification(TRAINING)
    tuned = certification(TRAINING, startupStallTimeoutSeconds=300, resources={
        "limits": {"cpu": "96", "memory": "700Gi"}, "requests": {"cpu": "48"}})
    built = []
    for cert in (plain, tuned):
        found = discover_for(cert, 0, NODES, catalog())
        assert not isinstance(found, DiscoveryFailure)
        built.append(build_workflow(cert, 0, found=found, catalog=catalog()))
    base, wf = built
    efa = {"vpc.amazonaws.com/efa": "32"}  # the aws platform's H100 fabric (fabric: network)
    assert _main(base)["resources"]["limits"] == {"nvidia.com/gpu": "8", "cpu": "64",
                                                  "memory": "500Gi", **efa}
    assert _main(wf)["resources"]["limits"] == {"nvidia.com/gpu": "8", "cpu": "96",
                                                "memory": "700Gi", **efa}
    assert _main(wf)["resources"]["requests"] == {"nvidia.com/gpu": "8", "cpu": "48",
                                                  "memory": "500Gi", **efa}
    assert _job(base)["startupStallTimeoutSeconds"] == 1200
    assert _job(wf)["startupStallTimeoutSeconds"] == 300
    assert _job(wf)["stallMultiplier"] == 3
    assert _job(wf)["goodputMeasurement"] == {"logProfileRef": "megatron-training",
                                              "sampleInterval": "10s"}


def test_a_training_category_with_too_few_gpus_is_refused_naming_the_node_count() -> None:
    """nemotron5-56b needs 32 GPUs (the reference's minGPUs): two 8-GPU nodes are a
    BuildError naming nodesPerJob and the 4 nodes that would do; four nodes build."""
    cert = certification(("training", "nemotron5-56b"))
    for count, ok in ((2, False), (4, True)):
        found = discover_for(cert, 0, nodes(count), catalog())
        assert not isinstance(found, DiscoveryFailure)
        try:
            build_workflow(cert, 0, found=found, catalog=catalog())
        except BuildError as exc:
            assert not ok
            assert str(exc) == (
                "spec.categories[0].options.nodesPerJob: training/nemotron5-56b needs at least "
                "32 GPUs, 2 node(s) x 8 GPUs give 16; run it on 4 node(s) or more")
        else:
            assert ok
