"""Reading a Certification and everything under it from a cluster, for ``status`` and ``report``.

One :class:`Snapshot` is one consistent-enough read: the Certification, the Workflows its
categories point at, their Jobs (by the ``cre.dev/workflow`` label) and the
BandwidthMeasurements of those Jobs (by ``spec.jobRef``), each turned into its API model.
Connection settings follow kubectl: ``--kubeconfig`` (else ``$KUBECONFIG``, else
``~/.kube/config``, else the in-cluster service account), ``--context``, ``-n`` (else the
context's namespace, else ``default``). Every failure becomes a one-line :class:`CliError`:
unreachable (5), not found (6), refused (7).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.kube_config import list_kube_config_contexts

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.converter import from_dict
from cre.api.errors import ValidationError
from cre.api.job import Job
from cre.api.kinds import BY_KIND
from cre.api.measurement import BandwidthMeasurement
from cre.api.workflow import Workflow
from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.kubeconfig import HOME_KUBECONFIG, check_kubeconfig, locate, unreachable_reason
from cre.core.certification.report import Snapshot
from cre.kube.client import ApiError, KubeClient, Resource

DEFAULT_TIMEOUT = 30.0


def cre_resource(kind: str) -> Resource:
    """The API resource of a CRE kind (group, version, plural from :mod:`cre.api.kinds`)."""
    info = BY_KIND[kind]
    return Resource(L.GROUP, L.VERSION, info.plural, namespaced=info.namespaced, kind=kind)


CERTIFICATIONS = cre_resource("Certification")
WORKFLOWS = cre_resource("Workflow")
JOBS = cre_resource("Job")
BANDWIDTH = cre_resource("BandwidthMeasurement")


@attrs.frozen(kw_only=True)
class Connection:
    """kubectl-style connection flags."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    timeout: float = DEFAULT_TIMEOUT


def _kubeconfig_path(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    home = os.path.expanduser("~/.kube/config")
    return home if os.path.exists(home) else None


def namespace_of(conn: Connection) -> str:
    """``-n``, else the namespace of the kubeconfig context in use, else ``default``."""
    if conn.namespace:
        return conn.namespace
    path = _kubeconfig_path(conn.kubeconfig)
    if path is None or not all(os.path.exists(p) for p in path.split(os.pathsep) if p):
        return "default"  # the connection reports the missing file
    try:
        contexts, current = list_kube_config_contexts(path)
    except Exception:  # connect() reports what is wrong with the file
        return "default"
    chosen = current
    if conn.context:
        chosen = next((c for c in contexts if c.get("name") == conn.context), None)
    ctx = (chosen or {}).get("context") or {}
    return str(ctx.get("namespace") or "default")


async def connect(conn: Connection) -> KubeClient:
    """A client for ``conn``; :class:`CliError` (unreachable) when no cluster is configured or
    the kubeconfig is wrong (checked first by :mod:`cre.cli.kubeconfig`)."""
    found = locate(conn.kubeconfig)
    if found is None:
        if conn.context:
            raise CliError(ExitCode.UNREACHABLE, f"--context {conn.context}: no kubeconfig found "
                           f"($KUBECONFIG, {HOME_KUBECONFIG}); pass --kubeconfig")
        try:
            return KubeClient.in_cluster()
        except ConfigException:
            raise CliError(ExitCode.UNREACHABLE, f"no kubeconfig ($KUBECONFIG, {HOME_KUBECONFIG}) "
                           "and not running in a pod: pass --kubeconfig") from None
    context = check_kubeconfig(found, conn.context)
    try:
        return await KubeClient.from_kubeconfig(found.path, context=context)
    except Exception as exc:  # anything else the loader trips on: still the kubeconfig's fault
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CliError(ExitCode.UNREACHABLE, f"{found.path}: not a valid kubeconfig: {text} "
                       "(kubectl config view shows what kubectl reads)") from None


def api_failure(exc: ApiError, *, host: str, what: str) -> CliError:
    """An :class:`ApiError` as the one line and exit code a person needs."""
    if exc.status == 0:
        why = unreachable_reason(exc)
        if why is None:
            why = exc.message.split(": ", 1)[-1] if exc.message else "no answer"
            why = why.split("(", 1)[0] or why  # an exception repr: its class name
        return CliError(ExitCode.UNREACHABLE, f"cannot reach the API server at {host}: {why} "
                        "(is the cluster up? kubectl cluster-info checks the same kubeconfig)")
    if exc.status in (401, 403):
        return CliError(ExitCode.API, f"{what}: the API server at {host} refused the request "
                        f"({exc.status} {exc.reason}): {exc.message}")
    return CliError(ExitCode.API, f"{what}: {exc.status} {exc.reason}: {exc.message}")


def read_model(cls: type[Any], raw: Mapping[str, Any]) -> Any:
    """``raw`` read as the model ``cls``; :class:`CliError` (exit code API) when it is not one."""
    try:
        model = from_dict(raw)
    except ValidationError as exc:
        raise CliError(ExitCode.API, f"{exc.subject}: cannot read it: {exc.errors[0]}") from None
    if not isinstance(model, cls):
        raise CliError(ExitCode.API, f"expected a {cls.__name__}, got {raw.get('kind')}")
    return model


async def get_certification(client: KubeClient, name: str, namespace: str) -> Certification:
    """The Certification; :class:`CliError` (not found) naming it and where it was looked for."""
    try:
        raw = await client.get(CERTIFICATIONS, name, namespace=namespace)
    except ApiError as exc:
        if exc.not_found:
            details = exc.body.get("details") or {}
            if details.get("name") == name:  # the object is missing, not its kind
                raise CliError(ExitCode.NOT_FOUND, f"Certification {namespace}/{name} not found "
                               f"(kubectl get certifications -n {namespace} lists them)") from None
            raise CliError(ExitCode.NOT_FOUND, f"{client.host} does not serve "
                           f"{CERTIFICATIONS.plural}.{L.GROUP}: CRE's CRDs are not installed "
                           "(kubectl apply -k deploy/crds)") from None
        raise api_failure(exc, host=client.host, what=f"Certification {namespace}/{name}") from None
    model: Certification = read_model(Certification, raw)
    return model


async def list_certifications(client: KubeClient, namespace: str | None) -> list[Certification]:
    """Every Certification of ``namespace`` (all namespaces when None), sorted."""
    try:
        raw = await client.list(CERTIFICATIONS, namespace=namespace)
    except ApiError as exc:
        if exc.not_found:
            raise CliError(ExitCode.NOT_FOUND, f"{client.host} does not serve "
                           f"{CERTIFICATIONS.plural}.{L.GROUP}: CRE's CRDs are not installed "
                           "(kubectl apply -k deploy/crds)") from None
        raise api_failure(exc, host=client.host, what="list certifications") from None
    certs = [read_model(Certification, item) for item in raw.get("items", [])]
    return sorted(certs, key=lambda c: (c.metadata.namespace or "", c.metadata.name or ""))


async def _list(client: KubeClient, res: Resource, namespace: str,
                query: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    try:
        raw = await client.list(res, namespace=namespace, query=query)
    except ApiError as exc:
        if exc.not_found:
            return []  # e.g. measurement CRD not installed: nothing measured
        raise api_failure(exc, host=client.host, what=f"list {res.plural}") from None
    items: list[dict[str, Any]] = raw.get("items", [])
    return items


async def snapshot(client: KubeClient, cert: Certification) -> Snapshot:
    """Everything under ``cert``: its Workflows, their Jobs and the Jobs' measurements."""
    namespace = cert.metadata.namespace or "default"
    workflows: dict[str, Workflow] = {}
    for category in cert.status.category_statuses:
        ref = category.workflow_ref
        if ref is None:
            continue
        ns = ref.namespace or namespace
        try:
            raw = await client.get(WORKFLOWS, ref.name, namespace=ns)
        except ApiError as exc:
            if exc.not_found:
                continue
            raise api_failure(exc, host=client.host, what=f"Workflow {ns}/{ref.name}") from None
        workflows[ref.name] = read_model(Workflow, raw)
    jobs: dict[str, Job] = {}
    namespaces = {namespace} | {w.metadata.namespace or namespace for w in workflows.values()}
    for ns in sorted(namespaces):
        for name in sorted(workflows):
            selector = {"labelSelector": f"{L.WORKFLOW}={name}"}
            for item in await _list(client, JOBS, ns, selector):
                job: Job = read_model(Job, item)
                jobs[job.metadata.name or ""] = job
    for workflow in workflows.values():  # Jobs without the label, by the groups' references
        for group in workflow.status.groups:
            ref = group.job_ref
            if ref is None or ref.name in jobs:
                continue
            ns = ref.namespace or workflow.metadata.namespace or namespace
            try:
                jobs[ref.name] = read_model(Job, await client.get(JOBS, ref.name, namespace=ns))
            except ApiError as exc:
                if not exc.not_found:
                    raise api_failure(exc, host=client.host, what=f"Job {ns}/{ref.name}") from None
    bandwidth: dict[str, BandwidthMeasurement] = {}
    if jobs:
        for ns in sorted(namespaces):
            for item in await _list(client, BANDWIDTH, ns):
                bm: BandwidthMeasurement = read_model(BandwidthMeasurement, item)
                if bm.spec.job_ref.name in jobs:
                    bandwidth[bm.spec.job_ref.name] = bm
    return Snapshot(certification=cert, workflows=workflows, jobs=jobs, bandwidth=bandwidth)
