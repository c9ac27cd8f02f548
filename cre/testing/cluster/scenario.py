"""Scenario DSL: a YAML story run against the emulator, the simulated cluster and CRE.

A scenario (``integration/cases/<suite>/<case>/input.yaml``, ``type: scenario``) says::

    cluster: {profile: aws-h100, nodes: 2, scale: 50,
              config: {waitForWorkersTimeout: 60, failedJobPodDeletionDelay: 0.5},
              overrides: [{behaviour: fail, role: launcher, after: 3, times: 2}],
              badNodes: {aws-h100-node-1: 0.4}, cliqueSize: 4}
                                # cliqueSize: label nodes nvidia.com/gpu.clique by index / 4;
                                # an override's groupTouches: [[n1], [n4, n5]] hits only
                                # groups running on a node of every set (bad node, bad link)
    controllers: [job]          # CRE controllers to run in-process (optional): job, workflow,
                                # certification, measurement, goodput, workloadrun;
                                # managerArgs: {infraScopedFailFast: false}
    ignoreSimulatorErrors: false  # true when apiFault makes the simulator's writes fail
    webhook: {failFirst: 2, expectToken: T}  # a report receiver on loopback (knobs of
                                # cre.testing.webhook); applied objects say $WEBHOOK_URL for its
                                # URL; collect ``webhook: {}`` records what it got (the token
                                # never: an output holding it is an error)
    apply:                      # objects to create, in order
      - render: {entry: communication/nccl-all-reduce, job: ar, as: job|trainjob, kai: false,
                 launcherRestartPolicy: OnFailure}   # a launcher that crash-loops in place
      - object: {...any manifest...}
    timeline:                   # injected events and waits, in order
      - wait: {kind: Job, apiVersion: cre.dev/v1alpha1, name: ar,
               condition: {type: Failed, status: "True"}, timeout: 600}
                                # also {field: a.b.0, equals: V} or {field: ..., contains: S};
                                # with count: phase: P and node: N (pods bound to N) filter
      - evict: {labels: {cre.dev/launcher: ar}}      # also: preempt; node: N (pods on N)
      - failLauncher: {after: 3, times: 1}
      - markNodeBad: {node: aws-h100-node-1, factor: 0.4}
      - imagePull: {image: nvcr.io, available: false}  # an image, repository or registry;
                                # nodes: [n1, ...] (default all), message: the runtime's error;
                                # available: true clears it
      - nodeNotReady: {node: aws-h100-node-1}       # also: nodeReady
      - cordon: {node: aws-h100-node-1}             # spec.unschedulable (also: uncordon)
      - delete: {kind: TrainJob, name: ar-workload}
      - patch: {kind: TrainJob, name: ar-workload, body: {metadata: {finalizers: [x/y]}}}
      - apiFault: {errors: [{code: 500, verb: create, resource: pods, rate: 1.0}]}
      - refuseCreate: {resource: trainjobs, code: 403,   # as admission would (400/403/409/422)
                       message: 'admission webhook "x" denied the request: ...'}
                                # also name, field (422), times; {resource: R, remove: true}
      - stopControllers: {}     # the manager dies: controllers, caches, queues gone
      - startControllers: {}    # a new manager: the same controllers over fresh caches
      - advance: 10             # let 10 simulated seconds pass
      - addNodes: 2             # register 2 more nodes of the profile (they turn Ready)
      - nodesReady: {}          # wait until every registered node is Ready
      - snapshot: {label: mid-run, collect: [...]}  # collect now (output "snapshots")
      - apply: {object: {...}}  # apply one more item (as in ``apply``) at this point
    collect:                    # what the golden records (normalised)
      - {kind: Job, apiVersion: cre.dev/v1alpha1, name: ar, fields: [status]}
      - {kind: Pod, labels: {cre.dev/launcher: ar}, fields: [metadata.name, status.phase]}
      - nodeResults: wf         # a Workflow's node-result ConfigMaps, decoded
      - report: c               # what `cre report -o json` prints for Certification c
      - facts: {kind: GoodputMeasurement, name: j-goodput, checks: ["status.result < 1"]}
                                # comparisons on run-dependent numbers (cluster.facts)

Waits watch the object (list + watch, never a sleep loop) and time out after ``timeout``
*simulated* seconds (default 900, and never before ``WAIT_WALL_FLOOR`` wall seconds, so a loaded
machine is not mistaken for a hang) with an error naming what was awaited. The output is a dict:
``collected`` (one entry per ``collect`` item), ``waits`` (each wait that was satisfied; a wait
with ``within: S`` also fails when it took more than S simulated seconds, which bounds "reported
quickly" without putting scheduling jitter into the golden; a wait with ``record: true`` also
lists the names of the objects that satisfied it, oldest first, e.g. to show which launcher pod
failed first) and ``simulatorErrors``.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import attrs
from anyio.abc import TaskGroup, TaskStatus

from cre.kube.client import (
    BATCH_JOBS,
    CONFIGMAPS,
    JOBSETS,
    NODES,
    PODS,
    REPORTEXPORTPOLICIES,
    REPORTEXPORTS,
    SECRETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    ApiError,
    KubeClient,
    Resource,
)
from cre.testing.apiserver.emulator import Clock
from cre.testing.cluster.clock import WAIT_WALL_FLOOR, SimClock
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.profiles import get_profile
from cre.testing.cluster.runtime import LogSink, SimulatedCluster, simulate
from cre.testing.cluster.stubs import parse_overrides
from cre.testing.cluster.workloads import render_documents, trainjob_objects
from cre.testing.webhook import WebhookReceiver, scenario_receiver, with_url

CRE_JOBS = Resource("cre.dev", "v1alpha1", "jobs", kind="Job")
CRE_WORKFLOWS = Resource("cre.dev", "v1alpha1", "workflows", kind="Workflow")
CRE_CERTIFICATIONS = Resource("cre.dev", "v1alpha1", "certifications", kind="Certification")
KINDS: dict[tuple[str, str], Resource] = {
    ("TrainJob", ""): TRAINJOBS, ("JobSet", ""): JOBSETS, ("Pod", ""): PODS, ("Node", ""): NODES,
    ("Job", ""): BATCH_JOBS, ("Job", "batch/v1"): BATCH_JOBS, ("Job", "cre.dev/v1alpha1"): CRE_JOBS,
    ("TrainingRuntime", ""): TRAINING_RUNTIMES, ("Workflow", ""): CRE_WORKFLOWS,
    ("Certification", ""): CRE_CERTIFICATIONS, ("ConfigMap", ""): CONFIGMAPS,
    ("WorkloadRun", ""): Resource("cre.dev", "v1alpha1", "workloadruns", kind="WorkloadRun"),
    ("BandwidthMeasurement", ""): Resource("cre.dev", "v1alpha1", "bandwidthmeasurements",
                                           kind="BandwidthMeasurement"),
    ("GoodputMeasurement", ""): Resource("cre.dev", "v1alpha1", "goodputmeasurements",
                                         kind="GoodputMeasurement"),
    # Cluster-scoped: a scenario deletes a shipped one to show what its absence does.
    ("LogProfile", ""): Resource("cre.dev", "v1alpha1", "logprofiles", namespaced=False,
                                 kind="LogProfile"),
    # Cluster-scoped, one per node: what the NodeCertification controller folded in.
    ("NodeCertification", ""): Resource("cre.dev", "v1alpha1", "nodecertifications",
                                        namespaced=False, kind="NodeCertification"),
    ("CertificationSchedule", ""): Resource("cre.dev", "v1alpha1", "certificationschedules",
                                            kind="CertificationSchedule"),
    ("ReportExportPolicy", ""): REPORTEXPORTPOLICIES, ("ReportExport", ""): REPORTEXPORTS,
    ("Secret", ""): SECRETS,
}
CONFIG_FIELDS = {"failedJobPodDeletionDelay": "failed_job_pod_deletion_delay",
                 "podFailureBackoff": "pod_failure_backoff",
                 "containerStartDelay": "container_start_delay",
                 "crashloopBackoff": "crashloop_backoff",
                 "defaultTolerationSeconds": "default_toleration_seconds",
                 "waitForWorkersTimeout": "wait_for_workers_timeout"}


class ScenarioError(ValueError):
    """The scenario is malformed, or a wait timed out."""


def resource_for(item: Mapping[str, Any], *, where: str) -> Resource:
    kind = item.get("kind")
    key = (str(kind), str(item.get("apiVersion", "")))
    res = KINDS.get(key) or KINDS.get((str(kind), ""))
    if res is None:
        raise ScenarioError(f"{where}.kind: unknown kind {kind!r} (known: "
                            f"{sorted({k for k, _ in KINDS})})")
    return res


def build_config(spec: Mapping[str, Any]) -> SimConfig:
    """The SimConfig of a scenario's ``cluster`` section."""
    profile = get_profile(str(spec.get("profile", "aws-h100")))
    if spec.get("cliqueSize") is not None:  # NVLink domains of this many nodes, by index
        profile = attrs.evolve(profile, clique_size=int(spec["cliqueSize"]))
    cfg = SimConfig(profile=profile)
    extra = dict(spec.get("config") or {})
    unknown = set(extra) - set(CONFIG_FIELDS)
    if unknown:
        raise ScenarioError(f"cluster.config: unknown fields {sorted(unknown)} "
                            f"(known: {sorted(CONFIG_FIELDS)})")
    cfg = attrs.evolve(cfg, **{CONFIG_FIELDS[k]: v for k, v in extra.items()})
    overrides = parse_overrides(spec.get("overrides") or [], where="cluster.overrides")
    bad = tuple((str(n), float(f)) for n, f in (spec.get("badNodes") or {}).items())
    return attrs.evolve(cfg, overrides=overrides, node_bandwidth=bad)


def _get_path(obj: Any, path: str) -> Any:
    """``a.b.0.c``: map keys, and list positions given as integers."""
    for part in path.split("."):
        if isinstance(obj, list) and part.isdigit():
            obj = obj[int(part)] if int(part) < len(obj) else None
        elif isinstance(obj, Mapping):
            obj = obj.get(part)
        else:
            return None
    return obj


def _selectors(item: Mapping[str, Any]) -> dict[str, str]:
    """The list/watch query selecting the objects a ``wait`` item names (labels, name)."""
    query: dict[str, str] = {}
    if item.get("labels"):
        query["labelSelector"] = ",".join(f"{k}={v}" for k, v in item["labels"].items())
    if item.get("name"):
        query["fieldSelector"] = f"metadata.name={item['name']}"
    return query


def _matches(obj: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    if item.get("name") and meta.get("name") != item["name"]:
        return False
    labels = meta.get("labels") or {}
    return all(labels.get(k) == v for k, v in (item.get("labels") or {}).items())


def _satisfied(objs: list[dict[str, Any]], item: Mapping[str, Any]) -> bool:
    if item.get("absent"):
        return not objs
    if "count" in item:
        pool = [o for o in objs if ("phase" not in item
                or (o.get("status") or {}).get("phase") == item["phase"]) and (
                "node" not in item or (o.get("spec") or {}).get("nodeName") == item["node"])]
        return len(pool) == int(item["count"])
    if not objs:
        return False
    obj = objs[0]
    cond = item.get("condition")
    if cond:
        want = {"status": "True", **cond}
        found = [c for c in (obj.get("status") or {}).get("conditions") or []
                 if all(c.get(k) == v for k, v in want.items())]
        if not found:
            return False
    if "phase" in item and (obj.get("status") or {}).get("phase") != item["phase"]:
        return False
    if "field" in item and "contains" in item:
        return str(item["contains"]) in str(_get_path(obj, str(item["field"])) or "")
    return not ("field" in item and _get_path(obj, str(item["field"])) != item.get("equals"))


def _all_ready(world: Any, count: int) -> bool:
    ready = [n for n in world.all(NODES) if any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (n.get("status") or {}).get("conditions") or [])]
    return len(ready) >= count


@attrs.define
class ScenarioRun:
    """One scenario's live state: the client, the cluster and the namespace."""

    client: KubeClient
    cluster: SimulatedCluster
    emu: Any
    namespace: str
    manager: ManagerSlot | None = None
    receiver: WebhookReceiver | None = None
    waits: list[dict[str, Any]] = attrs.field(factory=list)
    snapshots: list[dict[str, Any]] = attrs.field(factory=list)

    async def _list(self, res: Resource, item: Mapping[str, Any]) -> tuple[list[dict[str, Any]],
                                                                          str]:
        query = _selectors(item)
        ns = None if not res.namespaced else self.namespace
        got = await self.client.list(res, namespace=ns, query=query)
        items = sorted(got.get("items", []), key=lambda o: (
            str(o["metadata"].get("creationTimestamp", "")), o["metadata"]["name"]))
        return [o for o in items if _matches(o, item)], str(
            got.get("metadata", {}).get("resourceVersion", ""))

    async def wait(self, item: Mapping[str, Any], *, where: str) -> None:
        res = resource_for(item, where=where)
        timeout = float(item.get("timeout", 900))
        clock = self.cluster.clock
        start = clock.now()
        objs: list[dict[str, Any]] = []
        with anyio.move_on_after(max(clock.wall_delay(timeout), WAIT_WALL_FLOOR)) as scope:
            while True:
                objs, rv = await self._list(res, item)
                if _satisfied(objs, item):
                    break
                await self._next_event(res, item, rv)
        if scope.cancelled_caught:
            objs, _ = await self._list(res, item)
            state = [{"name": o["metadata"]["name"], "status": o.get("status")} for o in objs]
            raise ScenarioError(f"{where}: timed out after {timeout:g} simulated seconds "
                                f"waiting for {dict(item)}; now: {json.dumps(state)[:2000]}")
        took = clock.now() - start
        if "within" in item and took > float(item["within"]):
            raise ScenarioError(f"{where}: satisfied after {took:.1f} simulated seconds, "
                                f"more than within={item['within']}")
        entry: dict[str, Any] = {"wait": where, "satisfied": True}
        if item.get("record"):
            entry["names"] = [o["metadata"]["name"] for o in objs if "phase" not in item
                              or (o.get("status") or {}).get("phase") == item["phase"]]
        self.waits.append(entry)

    async def _next_event(self, res: Resource, item: Mapping[str, Any], rv: str) -> None:
        """Return after the first watch event past ``rv`` for the awaited objects."""
        query = {"watch": "true", "resourceVersion": rv, **_selectors(item)}
        ns = None if not res.namespaced else self.namespace
        try:
            async with self.client.stream_lines(res.path(namespace=ns), query=query) as lines:
                async for _ in lines:
                    return
        except ApiError as exc:
            if not exc.gone:
                raise

    async def pods(self, item: Mapping[str, Any]) -> list[dict[str, Any]]:
        objs, _ = await self._list(PODS, item)
        if not objs:
            raise ScenarioError(f"no pod matches {dict(item)}")
        return objs

    async def step(self, event: Mapping[str, Any], *, where: str) -> None:
        if len(event) != 1:
            raise ScenarioError(f"{where}: one action per timeline entry, got {sorted(event)}")
        (action, arg), = event.items()
        cl = self.cluster
        if action == "wait":
            await self.wait(arg, where=where)
        elif action == "snapshot":
            # What the objects say at this point of the story (recorded under "snapshots").
            items = list(arg.get("collect") or [])
            self.snapshots.append({"snapshot": where, "label": str(arg.get("label", "")),
                                   "collected": [await self.collect(it, where=f"{where}[{j}]")
                                                 for j, it in enumerate(items)]})
        elif action in ("evict", "preempt"):
            on = arg.get("node")  # only the pods bound to that node
            found = [p for p in await self.pods(arg)
                     if not on or (p.get("spec") or {}).get("nodeName") == on]
            if not found:
                raise ScenarioError(f"{where}: no pod matches {dict(arg)}")
            pod = found[int(arg.get("index", 0))]
            fn = cl.evict_pod if action == "evict" else cl.preempt_pod
            await fn(self.namespace, pod["metadata"]["name"])
        elif action == "failLauncher":
            cl.fail_launcher(after=float(arg.get("after", 5)), times=arg.get("times", 1),
                             message=str(arg.get("message", "")))
        elif action == "override":
            for ov in parse_overrides([arg], where=where):
                cl.add_override(ov)
        elif action == "imagePull":
            if not isinstance(arg, Mapping) or not arg.get("image") or not isinstance(
                    arg.get("available"), bool):
                raise ScenarioError(f"{where}: imagePull needs {{image, available: true|false"
                                    f"[, nodes, message]}}, got {arg!r}")
            nodes = arg.get("nodes")
            if nodes is not None and not (isinstance(nodes, list)
                                          and all(isinstance(n, str) for n in nodes)):
                raise ScenarioError(f"{where}.nodes: a list of node names, got {nodes!r}")
            cl.set_image_pull(str(arg["image"]), available=bool(arg["available"]),
                              nodes=nodes, message=str(arg.get("message", "")))
        elif action == "markNodeBad":
            cl.mark_node_bad(str(arg["node"]), factor=float(arg.get("factor", 0.4)))
        elif action in ("nodeNotReady", "nodeReady"):
            await cl.set_node_ready(str(arg["node"]), action == "nodeReady",
                                    reachable=not arg.get("unreachable", False))
        elif action in ("cordon", "uncordon"):
            # What kubectl cordon does; the Job's default nodeHealthMonitor
            # (node.spec.unschedulable == true) reads it as broken hardware.
            await self.client.patch(NODES, str(arg["node"]),
                                    {"spec": {"unschedulable": action == "cordon"}})
        elif action == "delete":
            res = resource_for(arg, where=where)
            await self.client.delete(res, str(arg["name"]), namespace=self.namespace)
        elif action == "patch":
            # A JSON merge patch, as `kubectl patch --type merge` sends it (e.g. a finalizer
            # another controller puts on a workload).
            res = resource_for(arg, where=where)
            await self.client.patch(res, str(arg["name"]), dict(arg["body"]),
                                    namespace=self.namespace)
        elif action == "apiFault":
            if self.emu is None:
                raise ScenarioError(f"{where}: apiFault needs an in-process emulator")
            self.emu.faults.configure(dict(arg))
        elif action == "refuseCreate":
            if self.emu is None:
                raise ScenarioError(f"{where}: refuseCreate needs an in-process emulator")
            if not isinstance(arg, Mapping) or "resource" not in arg or (
                    "code" not in arg and not arg.get("remove")):
                raise ScenarioError(f"{where}: refuseCreate needs {{resource, code[, message, "
                                    f"name, field, times]}} or {{resource, remove: true}}, "
                                    f"got {arg!r}")
            try:
                self.emu.faults.configure({"refuseCreate": dict(arg)})
            except ValueError as exc:
                raise ScenarioError(f"{where}: {exc}") from None
        elif action == "apply":
            await apply_objects(self.client, [arg], namespace=self.namespace,
                                profile_name=cl.config.profile.name,
                                nodes=[f"{cl.config.profile.name}-node-{i}"
                                       for i in range(cl.node_count)])
        elif action in ("stopControllers", "startControllers"):
            if self.manager is None:
                raise ScenarioError(f"{where}: {action} needs controllers")
            await (self.manager.stop(where=where) if action == "stopControllers"
                   else self.manager.start(where=where))
        elif action == "nodesReady":
            await cl.wait_for(lambda w: _all_ready(w, cl.node_count))
        elif action == "addNodes":
            await cl.add_nodes(int(arg))
        elif action == "advance":
            # A timer, not a world change: a quiet cluster (nothing scheduled) never ticks.
            target = cl.clock.now() + float(arg)
            while cl.clock.now() < target:  # noqa: ASYNC110 (a timer on a scaled clock)
                await anyio.sleep(cl.clock.wall_delay(target - cl.clock.now()))
        else:
            raise ScenarioError(f"{where}: unknown action {action!r}")

    async def node_results(self, workflow: str) -> dict[str, Any]:
        """A Workflow's node-result ConfigMaps, decoded (their names carry the Workflow's UID,
        so the golden records what they say, not what they are called)."""
        from cre.core.workflow import noderesults as NR

        wf = await self.client.get(CRE_WORKFLOWS, workflow, namespace=self.namespace)
        status = wf.get("status") or {}
        out: dict[str, Any] = {}
        for kind, field in ((NR.SUCCEEDED, "succeededNodesRef"), (NR.FAILED, "failedNodesRef"),
                            (NR.UNCERTIFIED, "uncertifiedNodesRef")):
            ref = status.get(field)
            if not ref:
                out[kind] = None
                continue
            cm = await self.client.get(CONFIGMAPS, str(ref["name"]), namespace=self.namespace)
            blob = base64.b64decode((cm.get("binaryData") or {})[NR.data_key(kind)])
            out[kind] = list(NR.decode_names(blob)) if kind == NR.SUCCEEDED else [
                attrs.asdict(r) for r in NR.decode_records(blob)]
        return out

    async def collect(self, item: Mapping[str, Any], *, where: str) -> Any:
        if "nodeResults" in item:
            return {"nodeResults": await self.node_results(str(item["nodeResults"]))}
        if "webhook" in item:
            if self.receiver is None:
                raise ScenarioError(f"{where}: webhook needs the scenario's webhook: section")
            exports, _ = await self._list(REPORTEXPORTS, {})
            return {"webhook": self.receiver.summary(export_keys={
                str((x.get("status") or {}).get("idempotencyKey")) for x in exports})}
        if "facts" in item:
            from cre.testing.cluster.facts import check_facts

            spec = item["facts"]
            objs, _ = await self._list(resource_for(spec, where=where), spec)
            if not objs:
                raise ScenarioError(f"{where}.facts: no object matches {dict(spec)}")
            return {"facts": check_facts(objs[0], list(spec.get("checks") or []),
                                         where=f"{where}.facts")}
        if "report" in item:
            # What `cre report -o json` prints for the Certification, read from the cluster.
            from cre.cli.cluster import get_certification, snapshot
            from cre.core.certification.report import build_report, report_json

            cert = await get_certification(self.client, str(item["report"]), self.namespace)
            return {"report": report_json(build_report(await snapshot(self.client, cert)))}
        if "logs" in item:
            spec = item["logs"]
            pod = (await self.pods(spec))[int(spec.get("index", 0))]
            text = await self.client.read_text(
                PODS.path(namespace=self.namespace, name=pod["metadata"]["name"],
                          subresource="log"),
                query={"container": str(spec.get("container", "node")),
                       "tailLines": str(spec.get("tail", 5))})
            return {"logs": text.splitlines()}
        res = resource_for(item, where=where)
        objs, _ = await self._list(res, item)
        fields = list(item.get("fields") or [])
        out = []
        for o in objs:
            out.append({f: _get_path(o, f) for f in fields} if fields else o)
        return {"kind": item.get("kind"), "items": out}


async def apply_objects(client: KubeClient, items: list[Mapping[str, Any]], *, namespace: str,
                        profile_name: str, nodes: list[str]) -> None:
    from cre.testing.cluster.model import OTHER, WATCHED

    by_kind = {r.kind: r for r in (*WATCHED, *OTHER)}
    for i, item in enumerate(items):
        where = f"apply[{i}]"
        if "render" in item:
            r = item["render"]
            fn = trainjob_objects if r.get("as", "job") == "trainjob" else render_documents
            docs = fn(entry=str(r["entry"]), job_name=str(r.get("job", "job")),
                      namespace=namespace, profile=get_profile(profile_name),
                      nodes=list(r.get("nodes") or nodes), kai=bool(r.get("kai", False)),
                      worker_backoff_limit=r.get("workerBackoffLimit"))
        elif "object" in item:
            docs = [dict(item["object"])]
        else:
            raise ScenarioError(f"{where}: expected 'render' or 'object', got {sorted(item)}")
        if "render" in item:
            restart = item["render"].get("launcherRestartPolicy")
            if restart:
                _launcher_restart(docs, str(restart), where=f"{where}.render")
            # Performance validation on the rendered CRE Job (thresholds, measurementTimeout).
            for doc in docs:
                if doc.get("kind") == "Job" and doc.get("apiVersion") == "cre.dev/v1alpha1":
                    for key in ("thresholds", "measurementTimeout"):
                        if key in item["render"]:
                            doc["spec"][key] = item["render"][key]
                    # Sampling cadence: controllers requeue in wall seconds while the cluster
                    # runs on scaled time, so a scenario about provisional samples shortens it.
                    if "sampleInterval" in item["render"] and doc["spec"].get(
                            "bandwidthMeasurement"):
                        doc["spec"]["bandwidthMeasurement"]["sampleInterval"] = \
                            item["render"]["sampleInterval"]
        for doc in docs:
            res = KINDS.get((doc["kind"], doc.get("apiVersion", ""))) or by_kind.get(
                doc["kind"]) or KINDS.get((doc["kind"], ""))
            if res is None:
                raise ScenarioError(f"{where}: cannot apply kind {doc['kind']!r}")
            await client.create(res, doc, namespace=namespace)


def _launcher_restart(docs: list[dict[str, Any]], policy: str, *, where: str) -> None:
    """Give the rendered runtime's MPI launcher ``restartPolicy: policy`` (``OnFailure``: a
    launcher that fails restarts in place and crash-loops, as a user's runtime may have it;
    CRE's own rendering says Never), with room for a few restarts in its backoffLimit."""
    if policy not in ("Never", "OnFailure"):
        raise ScenarioError(f"{where}.launcherRestartPolicy: {policy!r} is not Never or OnFailure")
    for doc in docs:
        if doc.get("kind") != "TrainingRuntime":
            continue
        for rjob in doc["spec"]["template"]["spec"]["replicatedJobs"]:
            if rjob.get("name") == "launcher":
                job_spec = rjob["template"]["spec"]
                job_spec["template"]["spec"]["restartPolicy"] = policy
                job_spec.pop("podFailurePolicy", None)  # Kubernetes: only with Never
                job_spec["backoffLimit"] = max(int(job_spec.get("backoffLimit", 0)), 3)
                return
    raise ScenarioError(f"{where}.launcherRestartPolicy: the rendered runtime has no launcher")


async def run_scenario(spec: Mapping[str, Any], *, emu: Any, clock: SimClock | None = None,
                       kubeconfig: str | None = None, logs: LogSink | None = None,
                       node_status: Mapping[str, Any] | None = None,
                       roles: frozenset[str] | None = None,
                       before_stop: Callable[[], Awaitable[None]] | None = None
                       ) -> dict[str, Any]:
    """Run one scenario against an in-process emulator (``emu``) or, with ``emu=None``, the
    API server of ``kubeconfig`` (a real kube-apiserver: ``logs``/``node_status`` give it the
    kubelet's log side; ``roles`` leaves simulated controllers to real ones); the
    (unnormalised) output. ``before_stop`` is awaited after the collection, while the cluster
    still runs (a recorder letting in-flight work finish)."""
    cluster_spec = spec.get("cluster") or {}
    cfg = build_config(cluster_spec)
    if roles is not None:
        cfg = attrs.evolve(cfg, roles=roles)
    namespace = str(spec.get("namespace", "default"))
    nodes = int(cluster_spec.get("nodes", 2))
    clock = clock or SimClock(scale=float(cluster_spec.get("scale", 50)),
                              start=emu.clock().timestamp() if emu is not None else time.time())
    async with scenario_receiver(spec.get("webhook")) as receiver, simulate(
            emu, kubeconfig=kubeconfig, profile=cfg.profile.name, nodes=nodes, config=cfg,
            clock=clock, logs=logs, node_status=node_status
    ) as cluster, anyio.create_task_group() as tg:
        if receiver is not None:
            spec = with_url(spec, receiver.url)
        manager = ManagerSlot(tg=tg, names=[str(n) for n in spec.get("controllers") or []],
                              cluster=cluster, namespace=namespace,
                              args=dict(spec.get("managerArgs") or {}))
        run = ScenarioRun(client=cluster.client, cluster=cluster, emu=emu, namespace=namespace,
                          manager=manager if manager.names else None, receiver=receiver)
        await manager.start(where="controllers")
        node_names = [f"{cfg.profile.name}-node-{i}" for i in range(nodes)]
        await apply_objects(cluster.client, list(spec.get("apply") or []), namespace=namespace,
                            profile_name=cfg.profile.name, nodes=node_names)
        for i, event in enumerate(spec.get("timeline") or []):
            await run.step(event, where=f"timeline[{i}]")
        collected = [await run.collect(item, where=f"collect[{i}]")
                     for i, item in enumerate(spec.get("collect") or [])]
        if before_stop is not None:
            await before_stop()
        tg.cancel_scope.cancel()
    out: dict[str, Any] = {"collected": collected, "waits": run.waits}
    if run.snapshots:
        out["snapshots"] = run.snapshots
    if not spec.get("ignoreSimulatorErrors"):
        out["simulatorErrors"] = cluster.errors
    token = receiver.expect_token if receiver is not None else None
    if token and token in json.dumps(out):
        raise ScenarioError("the webhook's bearer token appears in the scenario's output")
    return out


@attrs.define
class ManagerSlot:
    """The scenario's in-process controllers as one manager process. ``stopControllers``
    kills it (controllers, informer caches, work queues and in-flight requests gone, as a
    crashed pod); ``startControllers`` starts a new one over fresh informers, as a restarted
    manager that knows only what the API server holds."""

    tg: TaskGroup
    names: list[str]
    cluster: SimulatedCluster
    namespace: str
    args: dict[str, Any]
    scope: anyio.CancelScope | None = None
    ended: anyio.Event | None = None

    async def start(self, *, where: str) -> None:
        if self.scope is not None:
            raise ScenarioError(f"{where}: the controllers are already running")
        scope, ended = anyio.CancelScope(), anyio.Event()

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            with scope:
                async with anyio.create_task_group() as inner:
                    await start_controllers(inner, self.names, self.cluster, self.namespace,
                                            self.args)
                    task_status.started()
            ended.set()

        await self.tg.start(run)
        self.scope, self.ended = scope, ended

    async def stop(self, *, where: str) -> None:
        if self.scope is None or self.ended is None:
            raise ScenarioError(f"{where}: the controllers are not running")
        self.scope.cancel()
        await self.ended.wait()
        self.scope = self.ended = None


async def start_controllers(tg: TaskGroup, names: Sequence[str], cluster: SimulatedCluster,
                             namespace: str, args: Mapping[str, Any]) -> None:
    """Run CRE's controllers ``names`` in-process on the simulated clock, built from the
    registry the manager builds from (over one shared informer factory); ``args`` are the
    manager settings a scenario may set (``infraScopedFailFast``)."""
    from cre.controller.registry import BY_NAME

    unknown = set(args) - {"infraScopedFailFast"}
    if unknown:
        raise ScenarioError(f"managerArgs: unknown {sorted(unknown)} (known: "
                            "['infraScopedFailFast'])")
    for name in names:
        if name not in BY_NAME:
            raise ScenarioError(f"controllers: unknown controller {name!r} (known: "
                                f"{sorted(BY_NAME)})")
    from prometheus_client import CollectorRegistry

    from cre.api.converter import to_dict
    from cre.api.measurement import LogProfile
    from cre.controller.registry import ControllerContext
    from cre.core.measure.goodputprofiles import megatron_profile
    from cre.core.measure.logprofile import shipped_profiles
    from cre.core.workflow.reconcile import WorkflowSettings
    from cre.kube.client import LOGPROFILES
    from cre.kube.factory import InformerFactory
    from cre.kube.metrics import metrics_for

    clock = cluster.clock

    def now() -> datetime:
        return datetime.fromtimestamp(clock.now(), tz=UTC)

    registry = CollectorRegistry()
    informers = InformerFactory(cluster.client, namespaces=[namespace],
                                metrics=metrics_for(registry))
    ctx = ControllerContext(
        client=cluster.client, informers=informers, registry=registry, clock=now,
        time_scale=clock.scale, workflow_settings=WorkflowSettings(
            infra_scoped_fail_fast=bool(args.get("infraScopedFailFast", True))))
    # The LogProfiles CRE ships (as deploy/logprofiles) for the measurements to read with.
    shipped: dict[str, Callable[[], Iterable[LogProfile]]] = {
        "measurement": shipped_profiles, "goodput": lambda: (megatron_profile(),)}
    built = []
    for name in names:
        for profile in shipped[name]() if name in shipped else ():
            try:
                await cluster.client.create(LOGPROFILES, to_dict(profile))
            except ApiError as exc:  # installed by an earlier start (a restarted manager)
                if not exc.already_exists:
                    raise
        built.append(BY_NAME[name].build(ctx))
    tg.start_soon(informers.run)
    for ctrl in built:
        tg.start_soon(ctrl.run)


def run_case(case_dir: Path, data: dict[str, Any]) -> Any:
    """Golden runner for ``type: scenario`` (registered in cre.testing.golden.runners)."""
    del case_dir
    from cre.testing.apiserver import serve
    from cre.testing.apiserver.pytest_fixtures import default_crd_sources

    scale = float((data.get("cluster") or {}).get("scale", 50))
    clock = SimClock(scale=scale, start=time.time())

    async def main() -> dict[str, Any]:
        async with serve(crds=default_crd_sources(), clock=SimEmulatorClock(clock)) as emu:
            return await run_scenario(data, emu=emu, clock=clock)

    return anyio.run(main)


class SimEmulatorClock(Clock):
    """The emulator's clock reading a SimClock, so server timestamps are simulated time too."""

    def __init__(self, sim: SimClock) -> None:
        super().__init__()
        self.sim = sim

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.sim.now(), tz=UTC)
