"""Running the real JobSet and Kubeflow Trainer controllers against a running control plane.

The simulator re-implements what these controllers do to CRE's workloads (TrainJob -> JobSet ->
batch Jobs, failure policies); the oracle tier runs the upstream ones instead, built by
:mod:`.workload_build`. Both depend on admission webhooks - JobSet's controller expects objects
its defaulting webhook completed, Trainer's TrainJob webhook stamps runtime patches - so
:func:`start` gives each a webhook server on loopback with a serving certificate for 127.0.0.1
signed by the plane's CA (:attr:`ControlPlane.serving_cert`), and registers the
Mutating/ValidatingWebhookConfigurations upstream ships, pointed at
``https://127.0.0.1:<port>/<path>`` with that CA as ``caBundle``. It returns once the API server
demonstrably calls each webhook (a dry-run create shows the defaults, or is denied by the
validator). The processes are components of the plane (``PR_SET_PDEATHSIG``, stopped with it).
"""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from cre.api import labels

from .build import Unavailable
from .plane import Component, ControlPlane, ControlPlaneError, free_port, wait_for
from .workload_build import WorkloadBinaries, ensure_built

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
PROBE = "cre-webhook-probe"


@attrs.frozen
class Hook:
    """One webhook entry as upstream's manifests register it."""

    name: str
    path: str
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]
    label_exists: str | None = None
    """An ``objectSelector`` requiring this label (JobSet's pod webhooks only see its pods)."""

    def entry(self, *, url_base: str, ca_bundle: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"url": url_base + self.path, "caBundle": ca_bundle},
            "rules": [{"apiGroups": [self.group], "apiVersions": [self.version],
                       "operations": list(self.operations), "resources": [self.resource]}],
        }
        if self.label_exists is not None:
            entry["objectSelector"] = {"matchExpressions": [
                {"key": self.label_exists, "operator": "Exists"}]}
        return entry


@attrs.frozen
class Controller:
    """What one controller manager registers, and how to see that the API server calls it."""

    name: str
    mutating_config: str
    mutating: tuple[Hook, ...]
    validating_config: str
    validating: tuple[Hook, ...]
    mutation_probe: tuple[str, dict[str, Any], Callable[[dict[str, Any]], bool]]
    """(collection path, object, predicate on the dry-run result showing the defaults)."""
    denial_probe: tuple[str, dict[str, Any]]
    """(collection path, object only the validating webhook rejects)."""


_JOBSET_LABEL = labels.JOBSET_NAME


def _probe_jobset(success_targets: Sequence[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": [{"name": "p", "template": {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "image": "probe"}]}}}}}]}
    if success_targets:
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": list(success_targets)}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": PROBE}, "spec": spec}


def _probe_trainjob() -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": PROBE}, "spec": {
                "runtimeRef": {"name": "cre-webhook-probe-absent"},
                "runtimePatches": [{"manager": "cre.dev/webhook-probe"}]}}


def _jobset_defaulted(obj: dict[str, Any]) -> bool:
    rjob = obj.get("spec", {}).get("replicatedJobs", [{}])[0]
    return bool(rjob.get("template", {}).get("spec", {}).get("completionMode") == "Indexed")


def _trainjob_defaulted(obj: dict[str, Any]) -> bool:
    patches = obj.get("spec", {}).get("runtimePatches") or [{}]
    return bool(patches[0].get("time"))


JOBSET = Controller(
    name="jobset",
    # upstream's kustomize prefixes its config names with "jobset-"
    mutating_config="jobset-mutating-webhook-configuration",
    mutating=(
        Hook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io",
             "v1alpha2", "jobsets", ("CREATE",)),
        Hook("mpod.kb.io", "/mutate--v1-pod", "", "v1", "pods", ("CREATE",), _JOBSET_LABEL),
    ),
    validating_config="jobset-validating-webhook-configuration",
    validating=(
        Hook("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", "jobset.x-k8s.io",
             "v1alpha2", "jobsets", ("CREATE", "UPDATE")),
        Hook("vpod.kb.io", "/validate--v1-pod", "", "v1", "pods", ("CREATE",), _JOBSET_LABEL),
    ),
    mutation_probe=(JOBSETS, _probe_jobset(), _jobset_defaulted),
    denial_probe=(JOBSETS, _probe_jobset(["absent"])),
)

_T = ("trainer.kubeflow.org", "v1alpha1")
TRAINER = Controller(
    name="trainer",
    mutating_config="defaulter.trainer.kubeflow.org",
    mutating=(
        Hook("defaulter.trainjob.trainer.kubeflow.org",
             "/mutate-trainer-kubeflow-org-v1alpha1-trainjob", *_T, "trainjobs",
             ("CREATE", "UPDATE")),
    ),
    validating_config="validator.trainer.kubeflow.org",
    validating=tuple(
        Hook(f"validator.{kind}.trainer.kubeflow.org",
             f"/validate-trainer-kubeflow-org-v1alpha1-{kind}", *_T, f"{kind}s",
             ("CREATE", "UPDATE"))
        for kind in ("clustertrainingruntime", "trainingruntime", "trainjob")),
    mutation_probe=(TRAINJOBS, _probe_trainjob(), _trainjob_defaulted),
    denial_probe=(TRAINJOBS, _probe_trainjob()),
)


@attrs.define
class Running:
    """A started controller manager: its process and webhook port."""

    controller: Controller
    component: Component
    port: int


@attrs.define
class WorkloadControllers:
    """The controllers :func:`start` started on ``plane``; :meth:`stop` removes them."""

    plane: ControlPlane
    running: list[Running] = attrs.field(factory=list)

    def component(self, name: str) -> Component:
        for run in self.running:
            if run.controller.name == name:
                return run.component
        raise KeyError(f"workload controller {name!r} was not started")

    def stop(self) -> None:
        """Unregister the webhooks (while the API server is up), then stop the processes."""
        for run in reversed(self.running):
            if self.plane.ready():
                for kind, name in (("mutating", run.controller.mutating_config),
                                   ("validating", run.controller.validating_config)):
                    self.plane.request("DELETE", f"{ADMISSION}/{kind}webhookconfigurations/{name}")
            run.component.stop()
            if run.component in self.plane.components:
                self.plane.components.remove(run.component)
        self.running.clear()

    def __enter__(self) -> WorkloadControllers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(plane: ControlPlane, *, jobset: bool = True, trainer: bool = True,
          binaries: WorkloadBinaries | None = None, timeout: float = 120.0,
          log_level: str = "info", detach: bool = False) -> WorkloadControllers:
    """Start the JobSet and/or Trainer controller managers against ``plane`` (building them
    first if needed) and register their webhooks; raises :class:`~.build.Unavailable` when
    they cannot be built here and :class:`ControlPlaneError` when one fails to come up.
    ``detach``: the processes outlive this one (the CLI's ``up``; ``down`` stops them).

    The plane should serve the CRDs of the pinned versions (``cre._vendor.crds`` vendors
    ``jobset-v0.11.1`` and ``trainer-v2.2.0``)."""
    binaries = binaries or ensure_built().binaries
    pki = plane.workdir / "pki"
    cert_dir = pki / "webhook"
    cert_dir.mkdir(exist_ok=True)
    crt, key = plane.serving_cert
    if not crt.is_file():
        raise Unavailable(f"the plane in {plane.workdir} has no serving certificate ({crt})")
    shutil.copyfile(crt, cert_dir / "tls.crt")
    shutil.copyfile(key, cert_dir / "tls.key")
    ca_bundle = base64.b64encode(plane.ca_file.read_bytes()).decode()
    out = WorkloadControllers(plane=plane)
    chosen = [c for c, on in ((JOBSET, jobset), (TRAINER, trainer)) if on]
    try:
        for ctl in chosen:
            port = free_port()
            comp = plane.start_component(ctl.name, [
                f"--kubeconfig={plane.kubeconfig}", "--webhook-host=127.0.0.1",
                f"--webhook-port={port}", f"--cert-dir={cert_dir}", f"--zap-log-level={log_level}",
            ], binary=binaries.path(ctl.name), detach=detach)
            out.running.append(Running(controller=ctl, component=comp, port=port))
        for run in out.running:
            _register(plane, run, ca_bundle=ca_bundle, timeout=timeout)
    except BaseException:
        out.stop()
        raise
    return out


def _register(plane: ControlPlane, run: Running, *, ca_bundle: str, timeout: float) -> None:
    ctl, alive = run.controller, [run.component]
    context = plane.ssl_context()
    wait_for(lambda: _serving(run.port, context), timeout=timeout,
             what=f"{ctl.name}'s webhook server on 127.0.0.1:{run.port}", alive=alive)
    base = f"https://127.0.0.1:{run.port}"
    # Mutating first, seen at work, then validating: each probe shows its own configuration.
    _apply(plane, "mutating", ctl.mutating_config, ctl.mutating, base, ca_bundle)
    path, obj, defaulted = ctl.mutation_probe
    wait_for(lambda: _dry_run_result(plane, path, obj, defaulted), timeout=timeout,
             what=f"the API server to call {ctl.name}'s defaulting webhook", alive=alive)
    _apply(plane, "validating", ctl.validating_config, ctl.validating, base, ca_bundle)
    path, obj = ctl.denial_probe
    names = tuple(h.name for h in ctl.validating)
    wait_for(lambda: _dry_run_denied(plane, path, obj, names), timeout=timeout,
             what=f"the API server to call {ctl.name}'s validating webhook", alive=alive)


def _serving(port: int, context: ssl.SSLContext) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1"):
            return True
    except OSError:
        return False


def _apply(plane: ControlPlane, kind: str, name: str, hooks: Sequence[Hook], base: str,
           ca_bundle: str) -> None:
    body = {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{kind.capitalize()}WebhookConfiguration", "metadata": {"name": name},
            "webhooks": [h.entry(url_base=base, ca_bundle=ca_bundle) for h in hooks]}
    status, answer = plane.request(
        "PATCH", f"{ADMISSION}/{kind}webhookconfigurations/{name}"
        "?fieldManager=cre-controlplane&force=true", body,
        content_type="application/apply-patch+yaml")
    if status >= 300:
        raise ControlPlaneError(f"{kind} webhook configuration {name} was rejected "
                                f"({status}): {answer}")


def _dry_run_result(plane: ControlPlane, path: str, obj: dict[str, Any],
                    defaulted: Callable[[dict[str, Any]], bool]) -> bool:
    status, answer = plane.request("POST", f"{path}?dryRun=All", obj)
    return status < 300 and isinstance(answer, dict) and defaulted(answer)


def _dry_run_denied(plane: ControlPlane, path: str, obj: dict[str, Any],
                    names: Sequence[str]) -> bool:
    status, answer = plane.request("POST", f"{path}?dryRun=All", obj)
    message = answer.get("message", "") if isinstance(answer, dict) else str(answer)
    return status >= 400 and any(f'admission webhook "{n}" denied' in message for n in names)
