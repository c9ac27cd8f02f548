"""The one narrow seam where CRE talks HTTP to a Kubernetes API server.

Everything in ``cre.kube`` (reflectors, live reads, the plan executor, leader election), the
cluster simulator and the manager go through :class:`KubeClient`. It speaks raw JSON over
kubernetes-asyncio's transport, so it inherits that library's kubeconfig / in-cluster loading,
TLS and token refresh, without paying for its generated model classes (CRE keeps dicts at the
edge and turns them into slim projections itself).

Errors come back as :class:`ApiError`, which carries the server's ``Status`` body, so callers
branch on ``reason`` (``NotFound``, ``Conflict``, ``AlreadyExists``, ``Expired``...) the way
client-go callers use ``apierrors.IsNotFound``.

Like client-go's REST client, a request answered 429, or 5xx, *with* a ``Retry-After`` header
(API priority and fairness shedding load, a server starting up) is sent again after that many
seconds, at most :data:`MAX_RETRIES` times, before the error reaches the caller: the server
said it did not process the request. Without the header the caller decides (its own backoff).
Found by the chaos soak: under a sustained 10-30 % of 429s, a Workflow reconcile that needs a
dozen requests almost never completes, and its backoff outgrows the throttling.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import anyio
import attrs
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from cre.api.kinds import BY_KIND
from cre.api.labels import GROUP, VERSION

JSON = dict[str, Any]
# client-go's rest.Request default (maxRetries 10), and a cap on a single Retry-After wait.
MAX_RETRIES: Final = 10
MAX_RETRY_AFTER: Final = 10.0
Query = Mapping[str, str | int | bool] | Sequence[tuple[str, str]]

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class ApiError(Exception):
    """A non-2xx answer from the API server (or a transport failure, with ``status`` 0)."""

    def __init__(self, *, status: int, body: JSON | None = None, message: str = "",
                 retry_after: float | None = None) -> None:
        self.status = status
        self.body: JSON = body or {}
        self.reason: str = str(self.body.get("reason") or "")
        self.message = message or str(self.body.get("message") or "")
        self.retry_after = retry_after
        super().__init__(f"{status} {self.reason}: {self.message}".strip())

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """Optimistic-concurrency conflict (409 ``Conflict``), not ``AlreadyExists``."""
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the requested resourceVersion is older than the server's history window."""
        return self.status == 410

    @property
    def retryable(self) -> bool:
        """Worth retrying after a pause: throttling, server trouble or no connection."""
        return self.status in (0, 429, 500, 502, 503, 504)


def _read_environment_once(api: k8s_client.ApiClient) -> None:
    """Take the proxy the environment names for the API server now, and stop aiohttp from
    reading the environment again on every request.

    kubernetes-asyncio opens its aiohttp session with ``trust_env=True``, so before *each*
    request aiohttp looks for ``~/.netrc`` credentials in a worker thread: against the emulator
    a GET cost the client 0.96 ms of CPU instead of 0.27 ms, most of what the manager and the
    simulator spend per request. A Kubernetes client authenticates with its kubeconfig (token,
    client certificate), never with netrc. What the environment does mean for it, as for
    client-go, is a proxy (``HTTPS_PROXY`` / ``HTTP_PROXY``, bypassed by ``NO_PROXY``): that is
    read here once, unless the kubeconfig names one (``proxy-url``)."""
    rest = api.rest_client
    if not rest.proxy:
        url = urlsplit(str(api.configuration.host))
        proxy = getproxies().get(url.scheme)
        if proxy and not proxy_bypass(url.hostname or ""):
            rest.proxy = proxy
    # No public setter: the session was opened by kubernetes-asyncio.
    rest.pool_manager._trust_env = False


@attrs.frozen(slots=True)
class Resource:
    """A served resource: ``Resource("", "v1", "pods")`` or ``Resource("batch", "v1", "jobs")``."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The URL path of the collection, one object, or one object's subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", kind="Pod")
NODES = Resource("", "v1", "nodes", namespaced=False, kind="Node")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
EVENTS = Resource("", "v1", "events", kind="Event")
CONFIGMAPS = Resource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = Resource("", "v1", "secrets", kind="Secret")
SERVICES = Resource("", "v1", "services", kind="Service")
BATCH_JOBS = Resource("batch", "v1", "jobs", kind="Job")
LEASES = Resource("coordination.k8s.io", "v1", "leases", kind="Lease")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False,
                kind="CustomResourceDefinition")
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", kind="TrainJob")
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes",
                             kind="TrainingRuntime")
CLUSTER_TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1",
                                     "clustertrainingruntimes", namespaced=False,
                                     kind="ClusterTrainingRuntime")
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", kind="JobSet")


def cre_resource(kind: str) -> Resource:
    """The served resource of the CRE kind ``kind``, from its entry in :mod:`cre.api.kinds`."""
    info = BY_KIND[kind]
    return Resource(GROUP, VERSION, info.plural, namespaced=info.namespaced, kind=kind)


CERTIFICATIONS = cre_resource("Certification")
WORKFLOWS = cre_resource("Workflow")
JOBS = cre_resource("Job")
WORKLOADRUNS = cre_resource("WorkloadRun")
BANDWIDTHMEASUREMENTS = cre_resource("BandwidthMeasurement")
GOODPUTMEASUREMENTS = cre_resource("GoodputMeasurement")
LOGPROFILES = cre_resource("LogProfile")
NODECERTIFICATIONS = cre_resource("NodeCertification")
CERTIFICATIONSCHEDULES = cre_resource("CertificationSchedule")
REPORTEXPORTPOLICIES = cre_resource("ReportExportPolicy")
REPORTEXPORTS = cre_resource("ReportExport")


def _query_pairs(query: Query | None) -> list[tuple[str, str]]:
    if not query:
        return []
    items = query.items() if isinstance(query, Mapping) else query
    out: list[tuple[str, str]] = []
    for k, v in items:
        if isinstance(v, bool):
            out.append((k, "true" if v else "false"))
        else:
            out.append((k, str(v)))
    return out


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _error_from_body(status: int, raw: bytes | str | None,
                     headers: Mapping[str, str] | None) -> ApiError:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else (raw or "")
    body: JSON = {}
    try:
        parsed = json.loads(text) if text else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    return ApiError(status=status, body=body, message=str(body.get("message") or text[:512]),
                    retry_after=_retry_after(headers))


class KubeClient:
    """Raw-JSON Kubernetes client over kubernetes-asyncio's transport.

    Build one with :meth:`from_kubeconfig` or :meth:`in_cluster` (or :func:`connect`), share it
    between tasks, and :meth:`close` it at the end.
    """

    def __init__(self, api_client: k8s_client.ApiClient, *,
                 max_retries: int = MAX_RETRIES) -> None:
        self._api = api_client
        self.max_retries = max_retries
        # Requests sent again after a Retry-After answer (for metrics and tests).
        self.retried = 0

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    @classmethod
    async def from_kubeconfig(cls, path: str | None = None, *, context: str | None = None,
                              user_agent: str | None = None) -> KubeClient:
        """A client for the kubeconfig at ``path`` (or $KUBECONFIG / ~/.kube/config);
        ``user_agent`` names the program in the API server's audit log (``cre-manager/1.2``)."""
        cfg = k8s_client.Configuration()
        await k8s_config.load_kube_config(config_file=path, context=context,
                                          client_configuration=cfg)
        return cls._with_agent(k8s_client.ApiClient(configuration=cfg), user_agent)

    @classmethod
    def in_cluster(cls, *, user_agent: str | None = None) -> KubeClient:
        """A client from the pod's service-account token and CA (in-cluster config)."""
        cfg = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return cls._with_agent(k8s_client.ApiClient(configuration=cfg), user_agent)

    @classmethod
    def _with_agent(cls, api: k8s_client.ApiClient, user_agent: str | None) -> KubeClient:
        if user_agent:
            api.user_agent = user_agent
        _read_environment_once(api)
        return cls(api)

    async def close(self) -> None:
        await self._api.close()

    async def _call(self, method: str, path: str, *, query: Query | None, body: Any,
                    content_type: str, accept: str, timeout: float | None) -> Any:
        headers = {"Content-Type": content_type, "Accept": accept}
        try:
            return await self._api.call_api(
                path, method, query_params=_query_pairs(query), header_params=headers,
                body=body, auth_settings=["BearerToken"], _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ApiError(status=0, message=f"{method} {path}: {exc!r}") from exc
        except ApiException as exc:  # raised by the transport on some paths
            raise _error_from_body(exc.status or 0, exc.body, exc.headers) from exc

    async def request(self, method: str, path: str, *, query: Query | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float | None = 30.0) -> JSON:
        """One request; the decoded JSON answer, or :class:`ApiError` on a non-2xx status
        (sent again, as client-go does, while the server answers with a ``Retry-After``)."""
        attempt = 0
        while True:
            try:
                return await self._request(method, path, query=query, body=body,
                                           content_type=content_type, timeout=timeout)
            except ApiError as exc:
                if (attempt >= self.max_retries or exc.retry_after is None
                        or not (exc.status == 429 or exc.status >= 500)):
                    raise
                attempt += 1
                self.retried += 1
                await anyio.sleep(min(max(exc.retry_after, 0.0), MAX_RETRY_AFTER))

    async def _request(self, method: str, path: str, *, query: Query | None, body: Any,
                       content_type: str, timeout: float | None) -> JSON:
        resp = await self._call(method, path, query=query, body=body, content_type=content_type,
                                accept="application/json", timeout=timeout)
        async with resp:
            raw = await resp.read()
            if not 200 <= resp.status <= 299:
                raise _error_from_body(resp.status, raw, resp.headers)
        if not raw:
            return {}
        decoded = json.loads(raw)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    async def read_text(self, path: str, *, query: Query | None = None,
                        timeout: float | None = 30.0, limit_bytes: int | None = None) -> str:
        """A plain-text answer (pod logs), read to the end or to ``limit_bytes``.

        With ``limit_bytes`` the body is streamed and the read stops at the limit whatever the
        server sends (a server that ignores ``limitBytes``, a log with no newline): memory is
        bounded by the limit, and the connection is closed rather than drained. A character cut
        by the limit is dropped, not replaced."""
        resp = await self._call("GET", path, query=query, body=None,
                                content_type="application/json", accept="*/*", timeout=timeout)
        async with resp:
            if not 200 <= resp.status <= 299:
                raise _error_from_body(resp.status, await resp.read(), resp.headers)
            if not limit_bytes:
                return bytes(await resp.read()).decode("utf-8", "replace")
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            parts: list[str] = []
            left = limit_bytes
            while left > 0:
                chunk = await resp.content.read(left)
                if not chunk:
                    break
                left -= len(chunk)
                parts.append(decoder.decode(chunk))
            if left <= 0 and not resp.content.at_eof():
                resp.close()  # the rest is never read: do not return a half-read connection
        return "".join(parts)

    @asynccontextmanager
    async def stream_lines(self, path: str, *, query: Query | None = None,
                           timeout: float | None = None) -> AsyncIterator[AsyncIterator[bytes]]:
        """A streamed answer (watch, log follow) as an async iterator of raw lines.

        The context manager owns the connection: leaving it closes the stream.
        """
        resp = await self._call("GET", path, query=query, body=None,
                                content_type="application/json", accept="application/json",
                                timeout=timeout)
        try:
            if not 200 <= resp.status <= 299:
                raise _error_from_body(resp.status, await resp.read(), resp.headers)

            async def lines() -> AsyncIterator[bytes]:
                while True:
                    try:
                        line = await resp.content.readline()
                    except (aiohttp.ClientError, OSError) as exc:
                        raise ApiError(status=0, message=f"stream {path}: {exc!r}") from exc
                    if not line:
                        return
                    if line.strip():
                        yield line

            yield lines()
        finally:
            resp.release()
            resp.close()

    # -- conveniences over request() -------------------------------------------------------

    async def get(self, res: Resource, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> JSON:
        return await self.request("GET", res.path(namespace=namespace, name=name,
                                                  subresource=subresource))

    async def list(self, res: Resource, *, namespace: str | None = None,
                   query: Query | None = None) -> JSON:
        return await self.request("GET", res.path(namespace=namespace), query=query)

    async def create(self, res: Resource, body: JSON, *, namespace: str | None = None,
                     query: Query | None = None) -> JSON:
        ns = namespace or body.get("metadata", {}).get("namespace")
        return await self.request("POST", res.path(namespace=ns), body=body, query=query)

    async def replace(self, res: Resource, body: JSON, *, subresource: str | None = None,
                      query: Query | None = None) -> JSON:
        meta = body.get("metadata", {})
        return await self.request(
            "PUT", res.path(namespace=meta.get("namespace"), name=meta["name"],
                            subresource=subresource), body=body, query=query)

    async def patch(self, res: Resource, name: str, body: Any, *, namespace: str | None = None,
                    content_type: str = MERGE_PATCH, subresource: str | None = None,
                    query: Query | None = None) -> JSON:
        return await self.request(
            "PATCH", res.path(namespace=namespace, name=name, subresource=subresource),
            body=body, content_type=content_type, query=query)

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None) -> JSON:
        """Delete with optional preconditions (a UID or resourceVersion mismatch -> 409)."""
        opts: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        pre: JSON = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            opts["preconditions"] = pre
        if propagation_policy:
            opts["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        return await self.request("DELETE", res.path(namespace=namespace, name=name), body=opts)


def _kubeconfig_available(explicit: str | None) -> bool:
    return bool(explicit or os.environ.get("KUBECONFIG")
                or os.path.exists(os.path.expanduser("~/.kube/config")))


async def connect(kubeconfig: str | None = None, *, context: str | None = None) -> KubeClient:
    """A client from an explicit kubeconfig, else $KUBECONFIG / ~/.kube/config, else in-cluster."""
    if _kubeconfig_available(kubeconfig):
        return await KubeClient.from_kubeconfig(kubeconfig, context=context)
    return KubeClient.in_cluster()
