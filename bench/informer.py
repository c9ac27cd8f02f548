"""Informer benchmark: memory per cached pod, events/s into the store, event-to-handler latency.

* Memory (tracemalloc) of 10,000 realistic pods shaped like CRE's worker and launcher pods
  (JobSet/Trainer labels, owner references, full spec, kubelet status, managedFields) held as
  the slim ``PodView`` projection, as plain dicts (``json.loads``), and as kubernetes-asyncio
  ``V1Pod`` models.
* Throughput: the emulator (its CLI, a separate process) holds N labelled pods; the time from
  start until one handler has seen all N, for CRE's informer and for kopf (an ``on.event``
  handler, default settings, its own event loop in a thread) watching the same pods on the same
  emulator; plus CRE's watch-stream rate, replaying N events from a resumed watch.
* Latency, laid out as in production: the emulator in its own process, label patches paced
  at 1,000/s from a second (writer) process, CRE's informer in this process, and a bare aiohttp
  watch (parse each line, nothing else) in a third process reading the same events at the same
  time as the baseline. For each write: the time from just before the PATCH is sent
  ("from_send", includes the server's write path and its queueing) and from its
  acknowledgement ("from_ack": the event exists; fan-out + transport + client) to the handler
  seeing the new label value (CLOCK_MONOTONIC is system-wide). The emulator exposes no
  server-side commit timestamp, so from_ack is the closest to it. p50/p99/max per round, the
  achieved write rate, and the informer's p50/p99 as a ratio of the bare watch's. Medians over
  rounds are reported. ``--pin`` pins the emulator to CPU 0 and everything else to the other
  CPUs (os.sched_setaffinity). kopf gets one run.

Prints one JSON document. Usage: ``python -m bench informer [--pods 10000] [--watch-pods 4000]
[--rate 1000] [--seconds 3] [--rounds 3] [--skip-kopf] [--skip-v1pod] [--no-gc-freeze] [--pin]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import multiprocessing
import os
import queue
import signal
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from cre.api import labels as L
from cre.api.watch import WatchEventType
from cre.core.common.projections import pod_view
from cre.kube.client import KubeClient
from cre.kube.informer import Informer, ReflectorConfig
from cre.kube.pods import scoped_pod_informer

NS = "bench"
SELECTOR = "bench.cre.dev/pod"
#: CPU sets for --pin: the emulator alone on one CPU, the clients on the others.
PIN: dict[str, set[int]] = {}


def _pin(role: str, pid: int = 0) -> None:
    cpus = PIN.get(role)
    if cpus:
        os.sched_setaffinity(pid, cpus)


# -- realistic pods --------------------------------------------------------------------------


def _ts(second: int) -> str:
    return f"2026-03-01T10:{(second // 60) % 60:02d}:{second % 60:02d}Z"


def realistic_pod(i: int) -> dict[str, Any]:
    """Pod ``i`` of a catalog-shaped workload: 16 workers and 1 launcher per job."""
    job, slot = divmod(i, 17)
    launcher = slot == 16
    jobset = f"nccl-allreduce-{job:04d}"
    rjob = "launcher" if launcher else "node"
    owner_uid = str(uuid.UUID(int=job * 2 + launcher))
    created = _ts(job)
    name = f"{jobset}-{rjob}-0-{'' if launcher else str(slot) + '-'}{uuid.UUID(int=i).hex[:5]}"
    container = rjob
    labels = {
        (L.LAUNCHER if launcher else L.JOB): jobset,
        L.MANAGED_BY: "cre", L.JOBSET_NAME: jobset, L.REPLICATED_JOB_NAME: rjob,
        L.JOB_INDEX: "0", L.COMPLETION_INDEX: str(0 if launcher else slot),
        L.RESTART_ATTEMPT: "0", L.TRAINJOB_ANCESTOR_STEP: "launcher" if launcher else "trainer",
        "batch.kubernetes.io/controller-uid": owner_uid, "controller-uid": owner_uid,
        "batch.kubernetes.io/job-name": f"{jobset}-{rjob}-0", "job-name": f"{jobset}-{rjob}-0",
        "jobset.sigs.k8s.io/global-replicas": "17",
        "jobset.sigs.k8s.io/job-key": uuid.UUID(int=job + 7).hex,
    }
    running = {"running": {"startedAt": created}}
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "generateName": name[:-5], "namespace": NS,
            "uid": str(uuid.UUID(int=10**9 + i)), "resourceVersion": str(10_000 + i),
            "creationTimestamp": created, "labels": labels,
            "annotations": {
                "batch.kubernetes.io/job-completion-index": labels[L.COMPLETION_INDEX],
                "jobset.sigs.k8s.io/jobset-name": jobset,
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
                "kubectl.kubernetes.io/default-container": container,
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                 "name": f"{jobset}-{rjob}-0", "uid": owner_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update",
                 "apiVersion": "v1", "time": created, "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {
                     "f:annotations": {".": {}, **{f"f:{k}": {} for k in (
                         "batch.kubernetes.io/job-completion-index",
                         "jobset.sigs.k8s.io/jobset-name")}},
                     "f:finalizers": {".": {}, "v:\"batch.kubernetes.io/job-tracking\"": {}},
                     "f:labels": {".": {}, **{f"f:{k}": {} for k in labels}},
                     "f:ownerReferences": {".": {}, f"k:{{\"uid\":\"{owner_uid}\"}}": {}}},
                     "f:spec": {"f:containers": {f"k:{{\"name\":\"{container}\"}}": {
                         ".": {}, "f:command": {}, "f:env": {}, "f:image": {},
                         "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
                         "f:volumeMounts": {}}},
                         "f:hostname": {}, "f:restartPolicy": {}, "f:subdomain": {},
                         "f:tolerations": {}, "f:volumes": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": created, "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {},
                                           "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {},
                                           "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}},
            ],
        },
        "spec": {
            "nodeName": f"gpu-node-{(job * 16 + slot) % 2048:04d}",
            "hostname": name[:-6], "subdomain": jobset, "restartPolicy": "Never",
            "containers": [{
                "name": container, "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "command": ["/bin/bash", "-c"],
                "args": ["mpirun --allow-run-as-root -np 128 -bind-to none -map-by slot "
                         "-x NCCL_DEBUG=INFO -x NCCL_IB_HCA=mlx5 all_reduce_perf -b 8 -e 16G "
                         "-f 2 -g 1" if launcher else "sleep infinity"],
                "env": [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                        {"name": "OMPI_MCA_pml", "value": "ucx"},
                        {"name": "JOBSET_NAME", "value": jobset}],
                "resources": ({} if launcher else {
                    "limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
                    "requests": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}}),
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                 {"name": "kube-api-access-x7k2p", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
            }],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420,
                         "sources": [{"serviceAccountToken": {"expirationSeconds": 3607,
                                                              "path": "token"}},
                                     {"configMap": {"name": "kube-root-ca.crt", "items": [
                                         {"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "schedulerName": "default-scheduler", "serviceAccountName": "default",
            "dnsPolicy": "ClusterFirst", "priority": 0, "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "phase": "Running", "hostIP": f"10.0.{job % 250}.{slot + 1}",
            "hostIPs": [{"ip": f"10.0.{job % 250}.{slot + 1}"}],
            "podIP": f"10.244.{job % 250}.{slot + 2}",
            "podIPs": [{"ip": f"10.244.{job % 250}.{slot + 2}"}],
            "startTime": created, "qosClass": "BestEffort" if launcher else "Guaranteed",
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": created}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                     "ContainersReady", "PodScheduled")],
            "containerStatuses": [{
                "name": container, "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "imageID": "nvcr.io/nvidia/pytorch@sha256:" + uuid.UUID(int=3).hex * 2,
                "containerID": "containerd://" + uuid.UUID(int=i).hex * 2, "ready": True,
                "started": True, "restartCount": 0, "state": running, "lastState": {}}],
        },
    }


# -- memory ----------------------------------------------------------------------------------


def _measure(build: Callable[[list[bytes]], list[Any]], raw: list[bytes]) -> tuple[float, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = build(raw)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    size = after - before
    del held
    return size / len(raw), size


def memory(count: int, *, v1pod: bool) -> dict[str, Any]:
    raw = [json.dumps(realistic_pod(i)).encode() for i in range(count)]
    out: dict[str, Any] = {"pods": count,
                           "json_bytes_per_pod": round(sum(map(len, raw)) / count)}
    slim, _ = _measure(lambda r: [pod_view(json.loads(b)) for b in r], raw)
    plain, _ = _measure(lambda r: [json.loads(b) for b in r], raw)
    out["slim_bytes_per_pod"] = round(slim)
    out["dict_bytes_per_pod"] = round(plain)
    out["dict_over_slim"] = round(plain / slim, 1)
    if v1pod:
        from kubernetes_asyncio.client import ApiClient, Configuration

        async def models() -> float:
            cfg = Configuration()
            cfg.client_side_validation = False
            api = ApiClient(configuration=cfg)
            try:
                deser = api._ApiClient__deserialize  # type: ignore[attr-defined]
                per, _ = _measure(lambda r: [deser(json.loads(b), "V1Pod") for b in r], raw)
                return per
            finally:
                await api.close()

        v1 = asyncio.run(models())
        out["v1pod_bytes_per_pod"] = round(v1)
        out["v1pod_over_slim"] = round(v1 / slim, 1)
    return out


# -- emulator ----------------------------------------------------------------------------------


async def _start_emulator(folder: Path) -> tuple[asyncio.subprocess.Process, str, Path]:
    kc = folder / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cre.testing.apiserver", "--port", "0", "--write-kubeconfig",
        str(kc), stderr=asyncio.subprocess.PIPE)
    _pin("emulator", proc.pid)
    assert proc.stderr is not None
    line = (await proc.stderr.readline()).decode()
    if "serving" not in line:
        raise RuntimeError(f"emulator did not start: {line}")
    return proc, line.split("serving ", 1)[1].split(" ", 1)[0], kc


def _small_pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "labels": {SELECTOR: "x", L.GROUP_LABEL: "0"}},
            "spec": {"containers": [{"name": "node", "image": "x"}]}}


async def _create_pods(session: aiohttp.ClientSession, url: str, count: int, start: int = 0,
                       concurrency: int = 16) -> None:
    names = iter(range(start, start + count))

    async def worker() -> None:
        for i in names:
            async with session.post(f"{url}/api/v1/namespaces/{NS}/pods",
                                    json=_small_pod(i)) as r:
                if r.status != 201:
                    raise RuntimeError(f"create failed: {r.status} {await r.text()}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


Writes = tuple[int, float, dict[str, float]]  # (count, achieved rate, stamp -> ack time)


async def _paced_patches_async(url: str, *, pods: int, rate: float, seconds: float) -> Writes:
    total = int(rate * seconds)
    inflight = asyncio.Semaphore(256)
    tasks: list[asyncio.Task[None]] = []
    acks: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:

        async def one(seq: int) -> None:
            async with inflight:
                # The send time travels in the label value: CLOCK_MONOTONIC is system-wide.
                stamp = f"{time.monotonic():.6f}"
                body = {"metadata": {"labels": {L.GROUP_LABEL: stamp}}}
                async with session.patch(
                        f"{url}/api/v1/namespaces/{NS}/pods/p{seq % pods}", json=body,
                        headers={"Content-Type": "application/merge-patch+json"}) as r:
                    await r.read()
                acks[stamp] = time.monotonic()

        start = time.monotonic()
        for seq in range(total):
            delay = start + seq / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(seq)))
        await asyncio.gather(*tasks)
        return total, total / (time.monotonic() - start), acks


def _paced_patches_process(url: str, pods: int, rate: float, seconds: float,
                          pin: dict[str, set[int]]) -> Writes:
    PIN.update(pin)
    _pin("clients")
    return asyncio.run(_paced_patches_async(url, pods=pods, rate=rate, seconds=seconds))


async def paced_patches(url: str, *, pods: int, rate: float, seconds: float) -> Writes:
    """PATCH a label on pods round robin at ``rate``/s from a separate process, so the writer
    does not share a CPU or an event loop with the watcher."""
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx)
    try:
        return await asyncio.get_running_loop().run_in_executor(
            pool, _paced_patches_process, url, pods, rate, seconds, PIN)
    finally:
        # Joining the worker process blocks: keep it off the event loop being measured.
        await asyncio.to_thread(pool.shutdown)


def _stamp_of(labels: Any) -> str | None:
    stamp = labels.get(L.GROUP_LABEL) if isinstance(labels, dict) else labels
    return stamp if stamp and "." in stamp else None


def _latency_report(seen: list[tuple[str, float]], writes: Writes) -> dict[str, Any]:
    """From send (includes the server's write path and queueing) and from the write's
    acknowledgement (the event exists: server fan-out + transport + client), floored at 0."""
    total, achieved, acks = writes
    mine = [(stamp, now) for stamp, now in seen if stamp in acks]  # this run's writes only
    from_send = [now - float(stamp) for stamp, now in mine]
    from_ack = [max(0.0, now - acks[stamp]) for stamp, now in mine]
    out: dict[str, Any] = {"achieved_write_rate": round(achieved)}
    if mine:
        # Events seen before the writer process recorded the ack: from_ack is only as exact as
        # the writer's event loop (the emulator offers no server-side commit timestamp).
        out["seen_before_ack_fraction"] = round(
            sum(1 for stamp, now in mine if now < acks[stamp]) / len(mine), 3)
    if from_send:
        out["from_send"] = _latency_summary(from_send, total)
    if from_ack:
        out["from_ack"] = _latency_summary(from_ack, total)
    return out


def _latency_summary(lat: list[float], expected: int) -> dict[str, float]:
    ms = [x * 1000 for x in lat]
    return {"events": len(ms), "expected": expected, "p50_ms": round(_percentile(ms, 50), 2),
            "p99_ms": round(_percentile(ms, 99), 2), "max_ms": round(max(ms), 2)}


# -- CRE informer ------------------------------------------------------------------------------


async def _server_rv(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(f"{url}/api/v1/namespaces/{NS}/pods",
                           params={"limit": "1", "labelSelector": SELECTOR}) as r:
        return str((await r.json())["metadata"]["resourceVersion"])


async def _events_per_s(inf: Informer[Any], done: anyio.Event, count: int) -> int:
    """Run ``inf`` until ``done`` is set: ``count`` events over the time that took, per second."""
    async with anyio.create_task_group() as tg:
        t0 = time.perf_counter()
        tg.start_soon(inf.run)
        await done.wait()
        rate = round(count / (time.perf_counter() - t0))
        tg.cancel_scope.cancel()
    return rate


async def cre_side(url: str, kc: Path, *, pods: int, rate: float, seconds: float, rounds: int,
                   gc_freeze: bool = True) -> dict[str, Any]:
    """Initial sync rate, ``rounds`` latency runs (a bare watch in its own process reads the
    same events, as the baseline), then the watch-stream replay rate."""
    client = await KubeClient.from_kubeconfig(str(kc))
    cfg = ReflectorConfig(page_size=500)
    out: dict[str, Any] = {"latency_rounds": [], "raw_watch_floor_rounds": [],
                           "overhead_vs_raw_watch_rounds": []}
    seen = 0
    target = pods
    done = anyio.Event()
    latencies: list[tuple[str, float]] = []
    measuring = False

    def handler(etype: WatchEventType, old: Any, new: Any) -> None:
        nonlocal seen
        seen += 1
        if not measuring and seen == target:
            done.set()
        if measuring and new is not None:
            stamp = _stamp_of(new.label(L.GROUP_LABEL))
            if stamp is not None:
                latencies.append((stamp, time.monotonic()))

    async with aiohttp.ClientSession() as session:
        # 1) initial sync of `pods` objects: list (paged) + dispatch.
        inf: Informer[Any] = scoped_pod_informer(client, label_selector=SELECTOR,
                                                 namespaces=[NS], name="bench-cre", config=cfg,
                                                 caller="bench")
        inf.add_handler(handler)
        out["initial_sync_objects_per_s"] = await _events_per_s(inf, done, pods)
        # 2) latency at `rate` events/s. Long-lived objects (imported modules, the synced
        # cache) go to the permanent GC generation, as a latency-minded manager does after
        # start-up; otherwise a full collection over them is a 50-130 ms pause here.
        if gc_freeze:
            gc.collect()
            gc.freeze()
        for _ in range(rounds):
            async with anyio.create_task_group() as tg:
                tg.start_soon(inf.run)  # resumes; catch up before measuring
                rv = await _server_rv(session, url)
                await inf.wait_for_resource_version(rv, NS)
                bare = await BareWatch.start(url, rv, expected=int(rate * seconds))
                latencies, measuring = [], True
                writes = await paced_patches(url, pods=pods, rate=rate, seconds=seconds)
                with anyio.move_on_after(10):
                    while sum(1 for st, _ in latencies if st in writes[2]) < writes[0]:
                        await inf.wait_for_resource_version(
                            str(int(inf.resource_version(NS)) + 1), NS)
                measuring = False
                raw = await bare.result()
                mine = _latency_report(latencies, writes)
                floor = _latency_report(raw, writes)
                out["latency_rounds"].append(mine)
                out["raw_watch_floor_rounds"].append(floor)
                out["overhead_vs_raw_watch_rounds"].append(_overhead(latencies, raw))
                out.setdefault("ratio_to_raw_watch_rounds", []).append(_ratio(mine, floor))
                tg.cancel_scope.cancel()
        # 3) watch-stream throughput: stop, let the cluster change, resume and replay.
        rv_before = inf.resource_version(NS)
        await _create_pods(session, url, pods, start=pods)
        seen, target, done = 0, pods, anyio.Event()
        out["watch_events_per_s"] = await _events_per_s(inf, done, pods)
        out["watch_resumed_from"] = rv_before
    await client.close()
    for key in ("latency_rounds", "raw_watch_floor_rounds"):
        out[key.replace("rounds", "median_p99_ms")] = _median_p99(out[key])
    done_rounds = [r for r in out["overhead_vs_raw_watch_rounds"] if r]
    if done_rounds:
        out["overhead_vs_raw_watch_median_ms"] = {
            q: statistics.median(r[q] for r in done_rounds) for q in ("p50_ms", "p99_ms")}
    ratios = out.get("ratio_to_raw_watch_rounds", [])
    quantities = sorted({q for r in ratios for q in r})
    out["ratio_to_raw_watch_median"] = {
        q: round(statistics.median(r[q] for r in ratios if q in r), 2) for q in quantities}
    out["latency_median"] = _median_summary(out["latency_rounds"])
    out["raw_watch_floor_median"] = _median_summary(out["raw_watch_floor_rounds"])
    return out


def _ratio(mine: dict[str, Any], floor: dict[str, Any]) -> dict[str, float]:
    """The informer's from-ack percentiles over the bare watch's (1.0: no overhead)."""
    a, b = mine.get("from_ack"), floor.get("from_ack")
    if not a or not b:
        return {}
    # Below 0.1 ms the bare watch's figure is the writer's ack noise, not a latency: no ratio.
    return {f"{q}_from_ack": round(a[q] / b[q], 2) for q in ("p50_ms", "p99_ms") if b[q] >= 0.1}


def _median_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind (from_send / from_ack), the median over rounds of p50, p99 and max, and the
    median achieved write rate."""
    out: dict[str, Any] = {}
    if rounds:
        out["achieved_write_rate"] = statistics.median(r["achieved_write_rate"] for r in rounds)
    for kind in ("from_send", "from_ack"):
        have = [r[kind] for r in rounds if kind in r]
        if have:
            out[kind] = {q: statistics.median(h[q] for h in have)
                         for q in ("p50_ms", "p99_ms", "max_ms")}
    return out


def _median_p99(rounds: list[dict[str, Any]]) -> dict[str, float]:
    return {kind: statistics.median(r[kind]["p99_ms"] for r in rounds if kind in r)
            for kind in ("from_send", "from_ack") if any(kind in r for r in rounds)}


async def _raw_watch(url: str, rv: str, *, expected: int, ready: Any,
                     deadline: float) -> list[tuple[str, float]]:
    """A bare aiohttp watch that only parses each line: the floor the informer is compared to.
    Stops after ``expected`` stamped events or at ``deadline`` (monotonic)."""
    seen: list[tuple[str, float]] = []
    async with aiohttp.ClientSession() as session, session.get(
            f"{url}/api/v1/namespaces/{NS}/pods", params={
                "watch": "true", "resourceVersion": rv, "labelSelector": SELECTOR},
            timeout=aiohttp.ClientTimeout(total=None)) as r:
        ready.set()
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            async for line in r.content:
                now = time.monotonic()
                stamp = _stamp_of(json.loads(line)["object"]["metadata"].get("labels", {}))
                if stamp is not None:
                    seen.append((stamp, now))
                    if len(seen) >= expected:
                        break
    return seen


def _raw_watch_process(url: str, rv: str, expected: int, deadline: float, ready: Any,
                       results: Any, pin: dict[str, set[int]]) -> None:
    PIN.update(pin)
    _pin("clients")
    gc.freeze()
    results.put(asyncio.run(_raw_watch(url, rv, expected=expected, ready=ready,
                                       deadline=deadline)))


class BareWatch:
    """The baseline watch in its own process (its own CPU time and event loop), started and
    connected before the writes begin."""

    def __init__(self, proc: Any, results: Any) -> None:
        self._proc, self._results = proc, results

    @classmethod
    async def start(cls, url: str, rv: str, *, expected: int,
                    budget: float = 60.0) -> BareWatch:
        ctx = multiprocessing.get_context("spawn")
        ready, results = ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=_raw_watch_process, daemon=True, args=(
            url, rv, expected, time.monotonic() + budget, ready, results, PIN))
        proc.start()
        if not await asyncio.to_thread(ready.wait, 60):
            proc.kill()
            raise RuntimeError("the bare watch process did not connect")
        return cls(proc, results)

    async def result(self) -> list[tuple[str, float]]:
        try:
            seen: list[tuple[str, float]] = await asyncio.to_thread(self._results.get, True, 90)
        except queue.Empty:
            seen = []
        await asyncio.to_thread(self._proc.join, 10)
        if self._proc.is_alive():
            self._proc.kill()
        return seen


def _overhead(cre: list[tuple[str, float]], raw: list[tuple[str, float]]) -> dict[str, float]:
    """Per event: when CRE's handler saw it minus when the bare watch (another process) read
    it; negative when the informer got there first."""
    first = dict(raw)
    diffs = [(t - first[s]) * 1000 for s, t in cre if s in first]
    if not diffs:
        return {}
    return {"events": len(diffs), "p50_ms": round(_percentile(diffs, 50), 2),
            "p99_ms": round(_percentile(diffs, 99), 2)}


# -- kopf ------------------------------------------------------------------------------------


def kopf_side(url: str, *, pods: int, rate: float, seconds: float) -> dict[str, Any]:
    import kopf

    logging.getLogger("kopf").setLevel(logging.ERROR)
    registry = kopf.OperatorRegistry()
    stop = threading.Event()
    first_all = threading.Event()
    latencies: list[tuple[str, float]] = []
    state = {"seen": 0, "measuring": False}

    @kopf.on.startup(registry=registry)
    def configure(settings: Any, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 600

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> Any:
        return kopf.ConnectionInfo(server=url, insecure=True, scheme="Bearer",
                                   token="cre-emulator", default_namespace=NS)

    @kopf.on.event("v1", "pods", labels={SELECTOR: kopf.PRESENT}, registry=registry)
    async def on_event(body: Any, **_: Any) -> None:
        now = time.monotonic()
        state["seen"] += 1
        if state["seen"] == pods:
            first_all.set()
        if state["measuring"]:
            stamp = _stamp_of(dict(body.get("metadata", {}).get("labels", {})))
            if stamp is not None:
                latencies.append((stamp, now))

    def run() -> None:
        asyncio.run(kopf.operator(registry=registry, clusterwide=False, namespaces=[NS],
                                  standalone=True, stop_flag=stop))

    thread = threading.Thread(target=run, name="kopf", daemon=True)
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    thread.start()
    if not first_all.wait(timeout=300):
        out["error"] = f"kopf saw {state['seen']} of {pods} pods"
        stop.set()
        return out
    out["initial_sync_objects_per_s"] = round(pods / (time.perf_counter() - t0))
    state["measuring"] = True
    writes = asyncio.run(paced_patches(url, pods=pods, rate=rate, seconds=seconds))
    deadline = time.monotonic() + 20
    while len(latencies) < writes[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    out["latency"] = _latency_report(list(latencies), writes)
    stop.set()
    thread.join(timeout=30)
    return out


# -- main ------------------------------------------------------------------------------------


async def network(*, watch_pods: int, rate: float, seconds: float, kopf: bool,
                  rounds: int = 3, gc_freeze: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-informer-") as tmp:
        proc, url, kc = await _start_emulator(Path(tmp))
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{url}/api/v1/namespaces",
                                        json={"metadata": {"name": NS}}) as r:
                    r.raise_for_status()
                await _create_pods(session, url, watch_pods)
            out: dict[str, Any] = {"pods": watch_pods, "rate": rate, "seconds": seconds,
                                   "rounds": rounds}
            out["gc_freeze"] = gc_freeze
            out["cre"] = await cre_side(url, kc, pods=watch_pods, rate=rate, seconds=seconds,
                                        rounds=rounds, gc_freeze=gc_freeze)
            if kopf:
                # kopf sees the same pods plus those the CRE run added (2x watch_pods).
                out["kopf"] = await asyncio.to_thread(kopf_side, url, pods=2 * watch_pods,
                                                      rate=rate, seconds=seconds)
                k = out["kopf"].get("initial_sync_objects_per_s")
                if k:
                    out["cre_over_kopf_initial_sync"] = round(
                        out["cre"]["initial_sync_objects_per_s"] / k, 1)
            return out
        finally:
            proc.send_signal(signal.SIGTERM)
            await proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench informer", description=__doc__)
    p.add_argument("--pods", type=int, default=10_000, help="pods for the memory figures")
    p.add_argument("--watch-pods", type=int, default=4000,
                   help="pods on the emulator for the throughput figures")
    p.add_argument("--rate", type=float, default=1000.0, help="events/s for the latency run")
    p.add_argument("--seconds", type=float, default=3.0, help="length of the latency run")
    p.add_argument("--rounds", type=int, default=3, help="latency runs (median reported)")
    p.add_argument("--skip-kopf", action="store_true")
    p.add_argument("--skip-v1pod", action="store_true")
    p.add_argument("--no-gc-freeze", action="store_true",
                   help="leave the GC alone before the latency run (see cre_side)")
    p.add_argument("--pin", action="store_true",
                   help="pin the emulator to CPU 0 and this process, the writer and the bare "
                        "watch to the other CPUs")
    args = p.parse_args()
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            p.error("--pin needs at least 2 CPUs")
        PIN.update(emulator={cpus[0]}, clients=set(cpus[1:]))
        _pin("clients")
    logging.basicConfig(level=logging.WARNING)
    result: dict[str, Any] = {"memory": memory(args.pods, v1pod=not args.skip_v1pod)}
    result["pinned"] = {k: sorted(v) for k, v in PIN.items()}
    result["stream"] = asyncio.run(network(watch_pods=args.watch_pods, rate=args.rate,
                                           seconds=args.seconds, kopf=not args.skip_kopf,
                                           rounds=args.rounds, gc_freeze=not args.no_gc_freeze))
    mem = result["memory"]
    cre = result["stream"]["cre"]
    result["targets"] = {
        "slim_le_1KiB": mem["slim_bytes_per_pod"] <= 1024,
        "slim_10x_smaller_than_dict": mem["dict_over_slim"] >= 10,
        "median_p99_from_ack_lt_50ms": cre["latency_median_p99_ms"]["from_ack"] < 50,
        "median_p99_from_send_lt_50ms": cre["latency_median_p99_ms"]["from_send"] < 50,
        # The latency target is stated at 1,000 events/s: say whether the emulator got there.
        "achieved_rate_ge_95pct_of_requested": (
            cre["latency_median"].get("achieved_write_rate", 0) >= 0.95 * args.rate),
        "throughput_5x_kopf": (result["stream"].get("cre_over_kopf_initial_sync") or 0) >= 5,
    }
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
