"""Start-up checks: fail before doing any work, with an error that says what to fix.

Without them a misconfigured manager starts, its informers retry forever against a 404 or a 403,
and the pod looks Running while nothing is reconciled. Each check maps to its own exit code
(:class:`~cre_manager.errors.ExitCode`): the catalog is parsed (file and key of the first
problem), the API server must answer, our credentials must be accepted, every resource the
enabled controllers use must be served (missing CRDs are named, with how to install them), and
we must be allowed to list them.

Discovery (``/apis/<group>/<version>``) is used rather than reading CustomResourceDefinitions, so
the manager needs no cluster-wide permission on CRDs (every authenticated user may discover).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from cre.catalog.errors import CatalogError
from cre.catalog.loader import default_catalog_dir, load_catalog
from cre.kube.client import ApiError, KubeClient
from cre_manager.controllers import RequiredResource
from cre_manager.errors import ExitCode, StartupError

log = logging.getLogger("cre_manager.checks")
CHECK_TIMEOUT = 10.0
_DEFAULT_REASON = {401: "Unauthorized", 403: "Forbidden"}


def check_catalog(catalog_dir: Path | None) -> Path:
    """Parse the whole catalog; returns its directory."""
    try:
        root = catalog_dir or default_catalog_dir()
        catalog = load_catalog(root)
    except CatalogError as exc:
        raise StartupError(ExitCode.CATALOG_INVALID,
                           f"catalog invalid: {exc} (fix the file, or pass --catalog-dir)") \
            from None
    log.info("catalog loaded", extra={"catalogDir": str(root),
                                      "entries": len(getattr(catalog, "entries", ()) or ())})
    return root


def _refused(exc: ApiError, what: str) -> StartupError:
    return StartupError(ExitCode.CREDENTIALS_REFUSED,
                        f"the API server refused our credentials ({exc.status} "
                        f"{exc.reason or _DEFAULT_REASON.get(exc.status, '')}) while {what}: "
                        "check the kubeconfig's user/token or the service account and its RBAC "
                        "(deploy/rbac)")


async def check_api(client: KubeClient) -> str:
    """The server answers ``/version`` with our credentials; returns its gitVersion."""
    try:
        info = await client.request("GET", "/version", timeout=CHECK_TIMEOUT)
    except ApiError as exc:
        if exc.status in (401, 403):
            raise _refused(exc, "reading /version") from None
        if exc.status == 0 or exc.retryable:
            raise StartupError(ExitCode.API_UNREACHABLE,
                               f"cannot reach the API server at {client.host}: "
                               f"{exc.__cause__ or exc.message}") \
                from None
        raise StartupError(ExitCode.API_UNREACHABLE,
                           f"the API server at {client.host} answered /version with {exc}") \
            from None
    version = str(info.get("gitVersion") or "unknown")
    log.info("API server reachable", extra={"host": client.host, "serverVersion": version})
    return version


async def check_resources(client: KubeClient, required: Sequence[RequiredResource], *,
                          namespaces: Sequence[str]) -> None:
    """Every required resource is served and listable in the watched namespaces."""
    missing: list[RequiredResource] = []
    served: dict[str, set[str]] = {}
    for res in required:
        if res.discovery_path not in served:
            try:
                doc = await client.request("GET", res.discovery_path, timeout=CHECK_TIMEOUT)
                served[res.discovery_path] = {str(r.get("name")) for r in
                                              doc.get("resources") or []}
            except ApiError as exc:
                if exc.status in (401, 403):
                    raise _refused(exc, f"discovering {res.discovery_path}") from None
                if not exc.not_found:
                    raise StartupError(ExitCode.API_UNREACHABLE,
                                       f"discovery of {res.discovery_path} failed: {exc}") \
                        from None
                served[res.discovery_path] = set()
        if res.plural not in served[res.discovery_path]:
            missing.append(res)
    if missing:
        hints = sorted({r.hint for r in missing})
        raise StartupError(ExitCode.CRDS_MISSING,
                           "required CRDs are not installed: "
                           + ", ".join(r.crd_name for r in missing) + "; " + "; ".join(hints))
    for res in required:
        targets: list[str | None] = list(namespaces) or [None]
        for ns in targets:
            try:
                await client.request("GET", res.list_path(ns), query={"limit": 1},
                                     timeout=CHECK_TIMEOUT)
            except ApiError as exc:
                if exc.status in (401, 403):
                    where = f"in namespace {ns}" if ns else "cluster-wide"
                    raise _refused(exc, f"listing {res.crd_name} {where}") from None
                raise StartupError(ExitCode.API_UNREACHABLE,
                                   f"listing {res.crd_name} failed: {exc}") from None
    log.info("required resources served",
             extra={"resources": [r.crd_name for r in required]})
