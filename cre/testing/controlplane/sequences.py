"""The cluster simulator against the real Job controller and kube-scheduler, per scenario.

The simulator's batch Job controller and scheduler are re-implementations; if they are wrong
in the same way CRE is, every scenario golden passes and the first cluster disagrees. Here a
scenario golden (``integration/cases/scenario/*/input.yaml``) runs twice on one real
kube-apiserver, emptied in between: **A** with the full simulator, **B** with the upstream
kube-controller-manager's Job controller and kube-scheduler in place of the simulated ones
(the simulator keeps Trainer, JobSet, node lifecycle and the kubelets). So the only difference
is the two controllers. With ``workloads=True`` run B also has the real JobSet v0.11.1 and
Trainer v2.2.0 controllers with their webhooks (:mod:`.workloads`) and the simulator plays only
the node lifecycle and the kubelets; that needs a plane with the CRDs of those versions
(:func:`workload_plane`).

What CRE observes is recorded in both runs with CRE's informer: for every TrainJob, JobSet,
batch Job, Pod and CRE Job of the namespace, each state it passes through (phase, conditions
as type/status/reason, whether it is being deleted) and its deletion, normalised (a generated
pod name becomes its ``generateName`` and its rank among the pods of that prefix; uids, times
and resourceVersions are not kept) and collapsed to the distinct consecutive states. The two
runs' sequences are compared per object, and so is the scenario's collected golden output
(normalised as the golden suite does). Each difference is either explained by an entry of
:data:`.sequence_allowlist.ALLOWED` (the reason in words) or reported as differing.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import attrs

from cre.api.watch import WatchEventType
from cre.kube.client import BATCH_JOBS, JOBSETS, PODS, TRAINJOBS, KubeClient, Resource
from cre.kube.informer import Informer, ReflectorConfig
from cre.testing.cluster.clock import SimClock
from cre.testing.cluster.kubelet_logs import KubeletLogs

from .plane import Component, ControlPlane
from .sequence_allowlist import ALLOWED, ALLOWED_WITH_WORKLOADS, Allowed

SIM_ROLES_WITH_REAL: Final = frozenset({"trainer", "jobset", "nodelifecycle", "kubelet"})
SIM_ROLES_WITH_WORKLOADS: Final = frozenset({"nodelifecycle", "kubelet"})
REAL_CONTROLLERS: Final = "job"
CASES_DIR: Final = Path(__file__).resolve().parents[3] / "integration" / "cases" / "scenario"
DELETED: Final = "DELETED"
# The pods recorded: every pod a batch Job owns (both Job controllers set this label).
POD_SCOPE: Final = "batch.kubernetes.io/job-name"
# Scenarios that cannot run on the real controllers, and why.
SKIPS: Final[Mapping[str, str]] = {
    "api-faults": "injects API faults through the emulator's /_emulator fault API; "
                  "kube-apiserver has no fault injection",
}
# Scenarios that cannot run with the real JobSet and Trainer (``workloads=True``), and why.
SKIPS_WITH_WORKLOADS: Final[Mapping[str, str]] = {
    **SKIPS,
    "workload-failed": "waits for the failed launcher's pods to be deleted, as the simulator's "
                       "JobSet does 0.5 s after the Job fails (the reference's Mokka "
                       "measurement); JobSet v0.11.1 keeps a failed JobSet's finished child "
                       "Jobs and their pods (it deletes only active ones, and all of them only "
                       "on a RestartJobSet failure policy), so the wait never ends",
}
SETTLE_BOUND: Final = 90.0  # wall seconds at most spent waiting for a run's deletions


@attrs.frozen
class Difference:
    # "sequence", "placement" (sequences of one Job's pods swapped), "deleted-only-simulated"
    # (the same states, then deleted in run A only), "shape" or "collected"
    where: str
    obj: str  # "Pod/ar-workload-launcher-0-#1", or the collected item's path
    simulated: Any
    real: Any
    reason: str = ""


@attrs.frozen
class Comparison:
    scenario: str
    verdict: str  # equal / allowed / differing / skipped
    differences: tuple[Difference, ...] = ()
    skip_reason: str = ""
    seconds: float = 0.0

    def as_dict(self, *, details: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"scenario": self.scenario, "verdict": self.verdict,
                               "seconds": round(self.seconds, 1)}
        if self.skip_reason:
            out["reason"] = self.skip_reason
        if details and self.differences:
            out["differences"] = [attrs.asdict(d) for d in self.differences]
        return out


# -- what CRE observes ---------------------------------------------------------------------------

CRE_JOBS: Final = Resource("cre.dev", "v1alpha1", "jobs", kind="Job")
OBSERVED: Final[tuple[tuple[str, Resource], ...]] = (
    ("TrainJob", TRAINJOBS), ("JobSet", JOBSETS), ("Job", BATCH_JOBS), ("Pod", PODS),
    ("CREJob", CRE_JOBS))


def state_of(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The normalised state of one object: phase (pods), conditions, being deleted."""
    status = obj.get("status") or {}
    conds = sorted((str(c.get("type")), str(c.get("status")), str(c.get("reason") or ""))
                   for c in status.get("conditions") or [])
    state: dict[str, Any] = {"conditions": [list(c) for c in conds]}
    if kind == "Pod":
        state["phase"] = status.get("phase", "Pending")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        state["deleting"] = True
    return state


UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return UID.sub("<uid>", value) if isinstance(value, str) else value


def shape_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What a Job controller put into a new pod: labels, annotations, finalizers, owner
    references and spec (uids masked; the node, which the scheduler sets, left out)."""
    meta = pod.get("metadata") or {}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    owners = [{k: v for k, v in r.items() if k != "uid"} for r in meta.get("ownerReferences")
              or []]
    shape: dict[str, Any] = _mask({"labels": meta.get("labels"),
                                   "annotations": meta.get("annotations"),
                                   "finalizers": meta.get("finalizers"),
                                   "ownerReferences": owners, "spec": spec})
    return shape


@attrs.define
class Recorder:
    """Per-object sequences of distinct normalised states, fed by informers."""

    sequences: dict[str, list[Any]] = attrs.field(factory=dict)
    # (monotonic seconds, key, state) of every distinct state, for reading a run's timing.
    timeline: list[tuple[float, str, Any]] = attrs.field(factory=list)
    # A pod as its Job controller created it (shape_of); a batch Job's status field names.
    shapes: dict[str, Any] = attrs.field(factory=dict)
    aliases: dict[str, str] = attrs.field(factory=dict)
    """A generated pod name -> its normalised key (for the collected output)."""
    _names: dict[tuple[str, str], str] = attrs.field(factory=dict)
    _ranks: dict[tuple[str, str], int] = attrs.field(factory=dict)

    def key(self, kind: str, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        known = self._names.get((kind, uid))
        if known is not None:
            return known
        prefix = meta.get("generateName")
        if prefix and str(meta.get("name", "")).startswith(str(prefix)):
            rank = self._ranks.get((kind, str(prefix)), 0) + 1
            self._ranks[(kind, str(prefix))] = rank
            name = f"{kind}/{prefix}#{rank}"
            self.aliases[str(meta["name"])] = f"{prefix}#{rank}"
        else:
            name = f"{kind}/{meta.get('name')}"
        self._names[(kind, uid)] = name
        return name

    def observe(self, kind: str, etype: WatchEventType, obj: Mapping[str, Any]) -> None:
        key = self.key(kind, obj)
        if etype is not WatchEventType.DELETED:
            if kind == "Pod" and key not in self.shapes:
                self.shapes[key] = shape_of(obj)
            elif kind == "Job":
                self.shapes[key] = sorted((obj.get("status") or {}).keys())
        state: Any = DELETED if etype is WatchEventType.DELETED else state_of(kind, obj)
        seq = self.sequences.setdefault(key, [])
        if not seq or seq[-1] != state:
            seq.append(state)
            self.timeline.append((time.monotonic(), key, state))


async def settle(rec: Recorder, *, quiet: float = 1.0, bound: float = SETTLE_BOUND) -> None:
    """Wait until the run's deletions are done (no object's last state is being deleted) and
    nothing changed for ``quiet`` seconds, so in-flight work after the scenario's last wait
    (worker pods stopping after a success) is recorded to its end in both runs. ``bound`` only
    stops waiting (what is unfinished then shows as a difference); it asserts nothing."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        last = rec.timeline[-1][0] if rec.timeline else start
        busy = any(isinstance(seq[-1], dict) and seq[-1].get("deleting")
                   for seq in rec.sequences.values())
        if not busy and time.monotonic() - last >= quiet:
            return
        await anyio.sleep(0.1)


@contextlib.asynccontextmanager
async def recording(client: KubeClient, namespace: str) -> AsyncIterator[Recorder]:
    """Record what CRE's informers see in ``namespace`` while the block runs."""
    rec = Recorder()
    config = ReflectorConfig(backoff_initial=0.05, backoff_max=1.0, backoff_jitter=0.0)
    async with anyio.create_task_group() as tg:
        informers: list[Informer[dict[str, Any]]] = []
        for kind, res in OBSERVED:
            inf: Informer[dict[str, Any]] = Informer(client, res, namespace=namespace,
                                                     transform=dict, name=f"seq-{res.plural}",
                                                     config=config, label_selector=(
                                                         POD_SCOPE if res == PODS else None))

            def handler(etype: WatchEventType, old: dict[str, Any] | None,
                        new: dict[str, Any] | None, kind: str = kind) -> None:
                obj = new if new is not None else old
                if obj is not None:
                    rec.observe(kind, etype, obj)

            inf.add_handler(handler)
            informers.append(inf)
            tg.start_soon(inf.run)
        for inf in informers:
            await inf.wait_synced()
        try:
            yield rec
        finally:
            tg.cancel_scope.cancel()


# -- comparing -------------------------------------------------------------------------------------

def rename(value: Any, aliases: Mapping[str, str]) -> Any:
    """``value`` with every generated pod name in its strings replaced by its key (longest
    names first, so no name is replaced inside another)."""
    if isinstance(value, dict):
        return {k: rename(v, aliases) for k, v in value.items()}
    if isinstance(value, list):
        return [rename(v, aliases) for v in value]
    if isinstance(value, str):
        for name in sorted(aliases, key=len, reverse=True):
            if name in value:
                value = value.replace(name, aliases[name])
        return value
    return value


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{path}.{k}" if path else str(k)))
        return out or {path: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict | list) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def _pod_group(key: str) -> str | None:
    """``Pod/<job>-<index>-#<n>`` -> ``<job>`` (the pods of one batch Job), else None."""
    m = re.fullmatch(r"Pod/(.+)-\d+-#\d+", key)
    return m.group(1) if m else None


def _swapped_groups(seq_a: Mapping[str, list[Any]], seq_b: Mapping[str, list[Any]]) -> set[str]:
    """The Jobs whose pods went through the same sequences in both runs, but under other
    indexes: the pods are interchangeable and only their places (nodes) differ."""
    def groups(seqs: Mapping[str, list[Any]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key, seq in seqs.items():
            group = _pod_group(key)
            if group is not None:
                out.setdefault(group, []).append(json.dumps(seq, sort_keys=True))
        return {g: sorted(v) for g, v in out.items()}

    ga, gb = groups(seq_a), groups(seq_b)
    return {g for g in ga if g in gb and ga[g] == gb[g]}


def _deleted_only_in(a: list[Any] | None, b: list[Any] | None) -> bool:
    """``a`` is ``b`` followed by nothing but its deletion (being deleted, then gone): the same
    object, deleted in one run and kept in the other."""
    if not a or not b or len(a) <= len(b) or a[:len(b)] != b:
        return False
    return all(st == DELETED or (isinstance(st, dict) and st.get("deleting"))
               for st in a[len(b):])


def compare(scenario: str, sim: tuple[Mapping[str, list[Any]], Any],
            real: tuple[Mapping[str, list[Any]], Any],
            allowed: Sequence[Allowed], *,
            shapes: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {})
            ) -> tuple[str, tuple[Difference, ...]]:
    """The verdict and the differences (each with its allowlist reason, or none): per-object
    state sequences, the collected output, and (``shapes``) what each pod was created with
    and which fields each batch Job's status carries."""
    diffs: list[Difference] = []
    for key in sorted(set(shapes[0]) | set(shapes[1])):
        flat_sa = _flatten(shapes[0].get(key))
        flat_sb = _flatten(shapes[1].get(key))
        for path in sorted(set(flat_sa) | set(flat_sb)):
            if flat_sa.get(path) != flat_sb.get(path):
                diffs.append(Difference("shape", f"{key}:{path}", flat_sa.get(path),
                                        flat_sb.get(path)))
    seq_a, seq_b = sim[0], real[0]
    swapped = _swapped_groups(seq_a, seq_b)
    for key in sorted(set(seq_a) | set(seq_b)):
        a, b = seq_a.get(key), seq_b.get(key)
        if a != b:
            where = "placement" if _pod_group(key) in swapped else "sequence"
            if where == "sequence" and _deleted_only_in(a, b):
                where = "deleted-only-simulated"
            diffs.append(Difference(where, key, a, b))
    flat_a, flat_b = _flatten(sim[1]), _flatten(real[1])
    for path in sorted(set(flat_a) | set(flat_b)):
        if flat_a.get(path) != flat_b.get(path):
            diffs.append(Difference("collected", path, flat_a.get(path), flat_b.get(path)))
    out = []
    for d in diffs:
        entry = next((e for e in allowed if e.covers(scenario, where=d.where, obj=d.obj)), None)
        out.append(attrs.evolve(d, reason=entry.reason) if entry else d)
    if not out:
        return "equal", ()
    return ("allowed" if all(d.reason for d in out) else "differing"), tuple(out)


# -- running -----------------------------------------------------------------------------------

def load_case(name: str, cases: Path = CASES_DIR) -> dict[str, Any]:
    from ruamel.yaml import YAML

    path = cases / name / "input.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such scenario (known: "
                                f"{sorted(p.name for p in cases.iterdir() if p.is_dir())})")
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("type") != "scenario":
        raise ValueError(f"{path}: not a scenario (type: {data.get('type')!r})")
    return data


def _normaliser(case_dir: Path, data: dict[str, Any]) -> Callable[[Any], Any]:
    from cre.testing.golden.config import config_for_case
    from cre.testing.golden.harness import normalisation_for
    from cre.testing.golden.runners import get_runner

    config = config_for_case(case_dir)
    settings = normalisation_for(case_dir, data, get_runner("scenario"), config)
    return settings.apply


async def run_once(plane: ControlPlane, data: dict[str, Any], logs: KubeletLogs, *,
                   roles: frozenset[str] | None, scale: float = 1.0) -> tuple[Recorder, Any]:
    """One run of a scenario on ``plane`` (emptied first): what was recorded, and the output
    with generated pod names replaced by their normalised keys."""
    from cre.testing.cluster.scenario import run_scenario
    from cre.testing.golden.harness import HARNESS_KEYS

    await anyio.to_thread.run_sync(plane.reset)
    spec = {k: v for k, v in data.items() if k not in HARNESS_KEYS}
    namespace = str(spec.get("namespace", "default"))
    client = await KubeClient.from_kubeconfig(str(plane.kubeconfig), user_agent="cre-sequences")
    try:
        async with recording(client, namespace) as rec:
            out = await run_scenario(spec, emu=None, kubeconfig=str(plane.kubeconfig),
                                     logs=logs, node_status=logs.node_status(), roles=roles,
                                     clock=SimClock(scale=scale, start=time.time()),
                                     before_stop=lambda: settle(rec))
        return rec, rename(out, rec.aliases)
    finally:
        await client.close()


@contextlib.contextmanager
def real_controllers(plane: ControlPlane, *, workloads: bool = False
                     ) -> Iterator[list[Component]]:
    """The upstream Job controller and kube-scheduler (and with ``workloads`` the real JobSet
    and Trainer with their webhooks) on ``plane`` for the block's duration."""
    started = [plane.start_controller_manager(controllers=REAL_CONTROLLERS),
               plane.start_scheduler()]
    controllers = None
    try:
        if workloads:
            from . import workloads as real_workloads

            controllers = real_workloads.start(plane)
            started += [run.component for run in controllers.running]
        yield started
    finally:
        if controllers is not None:
            controllers.stop()
        for comp in reversed(started):
            comp.stop()
            if comp in plane.components:
                plane.components.remove(comp)


def real_roles(data: Mapping[str, Any], *, workloads: bool = False) -> frozenset[str]:
    """The simulated controllers of run B: with a workload rendered for KAI (every pod asks
    for ``schedulerName: kai-scheduler``, which kube-scheduler leaves alone, and no real KAI
    runs here) the simulated scheduler stays to play KAI; the Job controller is still real."""
    kai = any((item.get("render") or {}).get("kai") for item in data.get("apply") or []
              if isinstance(item, Mapping))
    roles = SIM_ROLES_WITH_WORKLOADS if workloads else SIM_ROLES_WITH_REAL
    return roles | {"scheduler"} if kai else roles


def workload_plane() -> ControlPlane:
    """A plane for ``workloads=True``: the JobSet and Trainer CRDs at the versions the real
    controllers are built at (the default plane installs the newest vendored ones), CRE's
    CRDs, and the garbage-collector and namespace controllers."""
    from cre._vendor.crds import JOBSET_OLDEST, TRAINER_OLDEST

    from .plane import CRE_CRDS, start

    plane = start(crds=[JOBSET_OLDEST, TRAINER_OLDEST, CRE_CRDS])
    try:
        plane.start_controller_manager(controllers="garbagecollector,namespace")
    except BaseException:
        plane.stop()
        raise
    return plane


def compare_scenarios(plane: ControlPlane, names: Sequence[str], *,
                      allowed: Sequence[Allowed] | None = None, cases: Path = CASES_DIR,
                      scale: float = 1.0, workloads: bool = False) -> list[Comparison]:
    """Run each scenario with the simulator (A) and with the real controllers (B), compare.

    Both runs use simulated time ``scale`` (default 1, whatever the scenario says): the real
    controllers read the simulator's timestamps (a container's ``finishedAt`` starts the Job
    controller's pod-failure backoff) against their wall clock, so a faster simulated clock
    writes times in their future (at scale 50 a 10 s backoff became ~2 minutes).

    ``plane`` must run the garbage collector and namespace controllers (as
    ``real_control_plane`` does) and not the Job controller or kube-scheduler."""
    allow = (ALLOWED_WITH_WORKLOADS if workloads else ALLOWED) if allowed is None else allowed
    runnable, results = [], {}
    skips = SKIPS_WITH_WORKLOADS if workloads else SKIPS
    for name in names:
        if name in skips:
            results[name] = Comparison(name, "skipped", skip_reason=skips[name])
        else:
            runnable.append((name, load_case(name, cases)))
    if not runnable:
        return [results[n] for n in names]

    async def run_all() -> None:
        cert, key = plane.serving_cert
        logs = KubeletLogs(cert=cert, key=key)
        await logs.start()
        try:
            sims: dict[str, tuple[Recorder, Any, float]] = {}
            for name, data in runnable:
                t0 = time.monotonic()
                rec, out = await run_once(plane, data, logs, roles=None, scale=scale)
                sims[name] = (rec, out, time.monotonic() - t0)
            with real_controllers(plane, workloads=workloads):
                for name, data in runnable:
                    t0 = time.monotonic()
                    rec, out = await run_once(plane, data, logs,
                                              roles=real_roles(data, workloads=workloads),
                                              scale=scale)
                    took = sims[name][2] + time.monotonic() - t0
                    norm = _normaliser(cases / name, data)
                    sim_rec = sims[name][0]
                    verdict, diffs = compare(name, (sim_rec.sequences, norm(sims[name][1])),
                                             (rec.sequences, norm(out)), allow,
                                             shapes=(sim_rec.shapes, rec.shapes))
                    results[name] = Comparison(name, verdict, diffs, seconds=took)
            await anyio.to_thread.run_sync(plane.reset)
        finally:
            await logs.close()

    anyio.run(run_all)
    return [results[n] for n in names]


def table(results: Sequence[Comparison], *, details: bool = False) -> dict[str, Any]:
    counts = {v: sum(r.verdict == v for r in results)
              for v in ("equal", "allowed", "differing", "skipped")}
    return {"scenarios": len(results), **counts,
            "results": [r.as_dict(details=details) for r in results]}
