"""KWOK on the real control plane: fake GPU nodes whose pods start, finish and die on cue.

The real Job controller and scheduler need nodes and kubelets. KWOK (``sigs.k8s.io/kwok``,
built by :func:`.build.ensure_kwok_built`) plays the kubelets of the nodes it manages by
applying *Stages*: a stage selects objects (jq expressions over the object), waits a delay and
patches their status or deletes them. This module writes one config file with CRE's stages and
starts KWOK with it, managing only the nodes labelled ``type=kwok`` (:func:`register_gpu_nodes`
makes such nodes from the simulator's platform profiles: GPU Feature Discovery labels and
allocatable ``nvidia.com/gpu``).

A pod tells its fake kubelet what its containers do through annotations on the pod (or the
Job's pod template):

- no :data:`EXIT_CODE`: the containers run until the pod is deleted;
- ``cre.dev/kwok-exit-code: "N"``: every container exits with N after
  ``cre.dev/kwok-run-seconds`` (default 0) of running; 0 makes the pod ``Succeeded``
  (``Completed``), anything else ``Failed`` (``Error``), whatever the restart policy;
- ``cre.dev/kwok-start-seconds``: delay between binding and ``Running`` (default 0);
- ``cre.dev/kwok-image-pull-error: "<why>"``: the image cannot be pulled: every container
  waits ``ErrImagePull`` (``Failed to pull image "X": <why>``), 1 s later ``ImagePullBackOff``
  (``Back-off pulling image "X": ErrImagePull: <why>``), 10 s later ``ErrImagePull`` again, for
  as long as the annotation is there; removed, the pod runs. (A stage sees only the pod, so
  "unavailable on some nodes" is said by annotating the pods of those nodes; the simulator's
  ``imagePull`` verb marks images per node instead.)

A deleted pod's running containers exit 143 (SIGTERM, ``Error``), the pod turns ``Failed``,
and once no finalizer remains (the Job controller removes its tracking finalizer from terminal
pods) KWOK deletes it with grace period 0, as the kubelet does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cre.testing.cluster.profiles import Profile, get_profile, node_manifest

from .build import KwokBinary, ensure_kwok_built
from .plane import Component, ControlPlane, ControlPlaneError, wait_for

NODE_LABEL = ("type", "kwok")
"""The label KWOK's ``--manage-nodes-with-label-selector`` selects: only these nodes are fake."""
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
EXIT_CODE = "cre.dev/kwok-exit-code"
RUN_SECONDS = "cre.dev/kwok-run-seconds"
START_SECONDS = "cre.dev/kwok-start-seconds"
IMAGE_PULL_ERROR = "cre.dev/kwok-image-pull-error"
STAGE_API = "kwok.x-k8s.io/v1alpha1"


def _seconds_from(annotation: str) -> dict[str, Any]:
    """A stage delay read from a pod annotation holding whole or fractional seconds (jq)."""
    return {"durationMilliseconds": 0, "durationFrom": {
        "expressionFrom": f'(.metadata.annotations["{annotation}"] // "0") + "s"'}}


def _stage(name: str, kind: str, expressions: list[dict[str, Any]], *,
           template: str | None = None, delete: bool = False,
           delay: dict[str, Any] | None = None, immediate: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceRef": {"apiGroup": "v1", "kind": kind},
                            "selector": {"matchExpressions": expressions}}
    if delay is not None:
        spec["delay"] = delay
    nxt: dict[str, Any] = {}
    if template is not None:
        nxt["statusTemplate"] = template
    if delete:
        nxt["delete"] = True
    spec["next"] = nxt
    if immediate:
        spec["immediateNextStage"] = True
    return {"apiVersion": STAGE_API, "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


NOT_DELETING = _req(".metadata.deletionTimestamp", "DoesNotExist")
DELETING = _req(".metadata.deletionTimestamp", "Exists")
READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
EXIT = f'.metadata.annotations["{EXIT_CODE}"]'
PULL = f'.metadata.annotations["{IMAGE_PULL_ERROR}"]'
WAITING = ".status.containerStatuses.[0].state.waiting.reason"

_NODE_CONDITIONS = """\
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
"""

_NODE_INITIALIZE = _NODE_CONDITIONS + """\
{{ $info := .status.nodeInfo }}
nodeInfo:
  architecture: {{ or $info.architecture "amd64" }}
  kubeletVersion: {{ or $info.kubeletVersion (printf "kwok-%s" Version) }}
  operatingSystem: {{ or $info.operatingSystem "linux" }}
phase: Running
"""

_UNREADY = ("'containers with unready status: [{{ range $i, $c := .spec.containers }}"
            "{{ if $i }} {{ end }}{{ $c.name }}{{ end }}]'")

# Pending on its node: what the kubelet writes once the sandbox is up (kubelet
# status/generate.go), start time, host and pod IPs (from KWOK's CIDR); containers creating.
_POD_PENDING = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodReadyToStartContainers
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: @UNREADY@
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: @UNREADY@
  type: Ready
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  imageID: ""
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    waiting:
      reason: ContainerCreating
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
hostIPs:
- ip: {{ NodeIPWith .spec.nodeName | Quote }}
{{ $ip := PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ $ip | Quote }}
podIPs:
- ip: {{ $ip | Quote }}
phase: Pending
startTime: {{ $now | Quote }}
""".replace("@UNREADY@", _UNREADY)

# Running: every container started and ready, the pod Ready.
_POD_RUNNING = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  reason: null
  message: null
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  reason: null
  message: null
  type: Ready
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  imageID: {{ printf "kwok://%s" .image | Quote }}
  containerID: {{ printf "kwok://%s" .name | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    waiting: null
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Running
"""


def _pod_finished(code: str, reason: str, phase: str) -> str:
    """Every container terminated with ``code`` (a template expression), the pod ``phase``;
    Ready/ContainersReady turn False with PodCompleted/PodFailed, as the kubelet writes."""
    why = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    initialized = "- type: Initialized\n  reason: PodCompleted\n" if phase == "Succeeded" else ""
    template = """\
{{ $now := Now }}
{{ $root := . }}
conditions:
@INITIALIZED@- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: @WHY@
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: @WHY@
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: PodReadyToStartContainers
containerStatuses:
{{ range $i, $c := .spec.containers }}
{{ $started := $now }}
{{ with $root.status.containerStatuses }}{{ with index . $i }}{{ with .state.running }}\
{{ $started = .startedAt }}{{ end }}{{ end }}{{ end }}
- image: {{ $c.image | Quote }}
  imageID: {{ printf "kwok://%s" $c.image | Quote }}
  containerID: {{ printf "kwok://%s" $c.name | Quote }}
  name: {{ $c.name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    waiting: null
    running: null
    terminated:
      exitCode: @CODE@
      reason: @REASON@
      containerID: {{ printf "kwok://%s" $c.name | Quote }}
      startedAt: {{ $started | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: @PHASE@
"""
    for key, value in (("@INITIALIZED@", initialized), ("@WHY@", why), ("@CODE@", code),
                       ("@REASON@", reason), ("@PHASE@", phase)):
        template = template.replace(key, value)
    return template


def _pod_image_pull(reason: str) -> str:
    """Every container waiting ``reason`` (ErrImagePull or ImagePullBackOff) with the kubelet's
    message built from the image and the pod's :data:`IMAGE_PULL_ERROR` annotation."""
    if reason == "ErrImagePull":
        said = 'printf "Failed to pull image %q: %s" $c.image $why'
    else:
        said = 'printf "Back-off pulling image %q: ErrImagePull: %s" $c.image $why'
    template = """\
{{ $root := . }}
{{ $why := index $root.metadata.annotations "@KEY@" }}
containerStatuses:
{{ range $c := .spec.containers }}
- image: {{ $c.image | Quote }}
  imageID: ""
  name: {{ $c.name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    waiting:
      reason: @REASON@
      message: {{ @SAID@ | Quote }}
{{ end }}
phase: Pending
"""
    return (template.replace("@KEY@", IMAGE_PULL_ERROR).replace("@REASON@", reason)
            .replace("@SAID@", said))


def stages() -> list[dict[str, Any]]:
    """CRE's KWOK stages: node initialize and heartbeat; pod pending (sandbox, IPs, containers
    creating) then running, exit on cue (annotations), SIGTERM on deletion, and the final
    grace-0 delete."""
    running = _req(".status.phase", "In", "Running")
    return [
        _stage("cre-node-initialize", "Node", [_req(READY, "NotIn", "True")],
               template=_NODE_INITIALIZE),
        _stage("cre-node-heartbeat", "Node",
               [_req(".status.phase", "In", "Running"), _req(READY, "In", "True")],
               template=_NODE_CONDITIONS, immediate=True,
               delay={"durationMilliseconds": 20000, "jitterDurationMilliseconds": 25000}),
        _stage("cre-pod-pending", "Pod",
               [NOT_DELETING, _req(".spec.nodeName", "Exists"),
                _req(".status.startTime", "DoesNotExist")], template=_POD_PENDING),
        _stage("cre-pod-running", "Pod",
               [NOT_DELETING, _req(".status.phase", "In", "Pending"),
                _req(".status.startTime", "Exists"), _req(READY, "NotIn", "True"),
                _req(PULL, "DoesNotExist")],
               template=_POD_RUNNING, delay=_seconds_from(START_SECONDS)),
        *_image_pull_stages(),
        _stage("cre-pod-succeeded", "Pod", [NOT_DELETING, running, _req(EXIT, "In", "0")],
               template=_pod_finished("0", "Completed", "Succeeded"),
               delay=_seconds_from(RUN_SECONDS)),
        _stage("cre-pod-failed", "Pod",
               [NOT_DELETING, running, _req(EXIT, "Exists"), _req(EXIT, "NotIn", "0")],
               template=_pod_finished(
                   f'{{{{ index $root.metadata.annotations "{EXIT_CODE}" }}}}', "Error", "Failed"),
               delay=_seconds_from(RUN_SECONDS)),
        _stage("cre-pod-terminate", "Pod",
               [DELETING, _req(".status.phase", "In", "Pending", "Running")],
               template=_pod_finished("143", "Error", "Failed")),
        _stage("cre-pod-delete", "Pod",
               [DELETING, _req(".status.phase", "In", "Succeeded", "Failed"),
                _req(".metadata.finalizers", "DoesNotExist")], delete=True),
    ]


def _image_pull_stages() -> list[dict[str, Any]]:
    """A pod annotated :data:`IMAGE_PULL_ERROR` cycles ErrImagePull -> (1 s)
    ImagePullBackOff -> (10 s) ErrImagePull while the annotation stays."""
    pending = [NOT_DELETING, _req(".status.phase", "In", "Pending"),
               _req(".status.startTime", "Exists"), _req(PULL, "Exists")]
    return [
        _stage("cre-pod-image-pull-failed", "Pod",
               [*pending, _req(WAITING, "NotIn", "ErrImagePull", "ImagePullBackOff")],
               template=_pod_image_pull("ErrImagePull")),
        _stage("cre-pod-image-pull-backoff", "Pod", [*pending, _req(WAITING, "In", "ErrImagePull")],
               template=_pod_image_pull("ImagePullBackOff"),
               delay={"durationMilliseconds": 1000}),
        _stage("cre-pod-image-pull-retry", "Pod",
               [*pending, _req(WAITING, "In", "ImagePullBackOff")],
               template=_pod_image_pull("ErrImagePull"),
               delay={"durationMilliseconds": 10000}),
    ]


def write_config(path: Path) -> Path:
    """The ``--config`` file: every stage, one YAML (JSON) document each."""
    path.write_text("".join("---\n" + json.dumps(s, indent=1) + "\n" for s in stages()),
                    encoding="utf-8")
    return path


def start_kwok(plane: ControlPlane, *, kwok: KwokBinary | None = None,
               detach: bool = False) -> Component:
    """Start KWOK against ``plane`` (building it first if needed), managing the ``type=kwok``
    nodes with :func:`stages`; stopped with the plane. Raises :class:`~.build.Unavailable`
    when KWOK cannot be built here."""
    kwok = kwok or ensure_kwok_built().kwok
    config = write_config(plane.workdir / "kwok-stages.yaml")
    return plane.start_component("kwok", [
        f"--kubeconfig={plane.kubeconfig}", f"--config={config}",
        f"--manage-nodes-with-label-selector={NODE_LABEL[0]}={NODE_LABEL[1]}",
        "--node-lease-duration-seconds=40", "--cidr=10.244.0.0/16",
    ], detach=detach, binary=kwok.path)


def gpu_node(profile: Profile, index: int) -> dict[str, Any]:
    """The Node of ``profile`` (the simulator's labels, allocatable GPUs, CPU, memory, pods),
    marked for KWOK, with an InternalIP (``10.10.x.y``, the pods' ``hostIP``) and without
    conditions: KWOK's initialize stage makes it Ready."""
    node = node_manifest(profile, index)
    node["metadata"]["labels"][NODE_LABEL[0]] = NODE_LABEL[1]
    node["metadata"]["annotations"] = {NODE_ANNOTATION[0]: NODE_ANNOTATION[1]}
    node["status"].pop("conditions", None)
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": f"10.10.{index // 250}.{index % 250 + 1}"},
        {"type": "Hostname", "address": node["metadata"]["name"]}]
    return node


def register_gpu_nodes(plane: ControlPlane, *, count: int, profile: str = "aws-h100",
                       first: int = 0, wait: bool = True, timeout: float = 120.0) -> list[str]:
    """Create ``count`` fake GPU nodes of ``profile`` (indices from ``first``, so more can be
    added later) and, unless ``wait`` is False, wait until KWOK reports them Ready; returns
    their names."""
    prof = get_profile(profile)
    names: list[str] = []
    for index in range(first, first + count):
        node = gpu_node(prof, index)
        status, body = plane.request("POST", "/api/v1/nodes", node)
        if status != 201:
            raise ControlPlaneError(f"node {node['metadata']['name']} was rejected "
                                    f"({status}): {body}")
        names.append(node["metadata"]["name"])
    if wait:
        wait_for(lambda: all(node_ready(plane, n) for n in names), timeout=timeout,
                 what=f"KWOK to make nodes {names} Ready", alive=plane.components)
    return names


def node_ready(plane: ControlPlane, name: str) -> bool:
    status, body = plane.request("GET", f"/api/v1/nodes/{name}")
    if status != 200:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (body.get("status") or {}).get("conditions") or [])


def pod_annotations(*, exit_code: int | None = None, run_seconds: float | None = None,
                    start_seconds: float | None = None,
                    image_pull_error: str | None = None) -> dict[str, str]:
    """The annotations that script a pod's fake containers (see the module docstring);
    ``image_pull_error``: the pull fails with that cause and the containers never run."""
    out: dict[str, str] = {}
    if image_pull_error is not None:
        if not image_pull_error.strip():
            raise ValueError(f"{IMAGE_PULL_ERROR}: the pull error cause is empty")
        out[IMAGE_PULL_ERROR] = image_pull_error
    if exit_code is not None:
        if not 0 <= exit_code <= 255:
            raise ValueError(f"{EXIT_CODE}: exit code {exit_code} is outside 0..255")
        out[EXIT_CODE] = str(exit_code)
    for key, value in ((RUN_SECONDS, run_seconds), (START_SECONDS, start_seconds)):
        if value is not None:
            if value < 0:
                raise ValueError(f"{key}: {value} seconds is negative")
            out[key] = f"{value:g}"
    return out

