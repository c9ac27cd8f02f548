"""Start-up checks: fail before doing any work, with an error that says what to fix.

Without them a misconfigured manager starts, its informers retry forever against a 404 or a 403,
and the pod looks Running while nothing is reconciled. Each check maps to its own exit code
(:class:`~cre_manager.errors.ExitCode`): the catalog is parsed (file and key of the first
problem), the API server must answer, our credentials must be accepted, every resource the
enabled controllers use must be served (missing CRDs are named, with how to install them), and
we must be allowed to list them.

The API server may be in a brown-out while we start (a manager restarted during one must come
back): transient answers are retried within the start-up budget (:mod:`cre_manager.retry`), and
only errors that waiting cannot heal exit at once (401/403: 4, missing CRDs: 5); a budget spent
on transient errors exits 3.

Discovery (``/apis/<group>/<version>``) is used rather than reading CustomResourceDefinitions, so
the manager needs no cluster-wide permission on CRDs (every authenticated user may discover).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path

from cre.catalog.errors import CatalogError
from cre.catalog.loader import default_catalog_dir, load_catalog
from cre.kube.client import JSON, ApiError, KubeClient
from cre_manager.controllers import RequiredResource
from cre_manager.errors import ExitCode, StartupError
from cre_manager.retry import BudgetSpent, StartupBudget

log = logging.getLogger("cre_manager.checks")
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


async def check_api(client: KubeClient, *, budget: StartupBudget) -> str:
    """The server answers ``/version`` with our credentials; returns its gitVersion. Transient
    answers (no connection, 409, 429, 5xx) are retried within ``budget``."""
    try:
        info = await budget.call("GET /version", lambda timeout: client.request(
            "GET", "/version", timeout=timeout))
    except BudgetSpent as exc:
        raise StartupError(ExitCode.API_UNREACHABLE,
                           f"cannot reach the API server at {client.host}: "
                           f"{exc.last.__cause__ or exc}") from None
    except ApiError as exc:
        if exc.status in (401, 403):
            raise _refused(exc, "reading /version") from None
        raise StartupError(ExitCode.API_UNREACHABLE,
                           f"the API server at {client.host} answered /version with {exc}") \
            from None
    version = str(info.get("gitVersion") or "unknown")
    log.info("API server reachable", extra={"host": client.host, "serverVersion": version})
    return version


async def _discover(client: KubeClient, path: str, *, budget: StartupBudget) -> set[str]:
    """The resource names served under the group-version ``path`` (empty when not served)."""
    try:
        doc = await budget.call(f"GET {path}", lambda timeout: client.request(
            "GET", path, timeout=timeout))
    except BudgetSpent as exc:
        raise StartupError(ExitCode.API_UNREACHABLE,
                           f"discovery of {path} failed: {exc}") from None
    except ApiError as exc:
        if exc.status in (401, 403):
            raise _refused(exc, f"discovering {path}") from None
        if not exc.not_found:
            raise StartupError(ExitCode.API_UNREACHABLE,
                               f"discovery of {path} failed: {exc}") from None
        return set()
    return {str(r.get("name")) for r in doc.get("resources") or []}


async def _list_one(client: KubeClient, path: str, timeout: float) -> JSON:
    return await client.request("GET", path, query={"limit": 1}, timeout=timeout)


async def check_resources(client: KubeClient, required: Sequence[RequiredResource], *,
                          namespaces: Sequence[str], budget: StartupBudget) -> None:
    """Every required resource is served and listable in the watched namespaces. Transient
    answers are retried within ``budget``; a resource that is not served is not waited for."""
    missing: list[RequiredResource] = []
    served: dict[str, set[str]] = {}
    for res in required:
        if res.discovery_path not in served:
            served[res.discovery_path] = await _discover(client, res.discovery_path,
                                                         budget=budget)
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
            path = res.list_path(ns)
            try:
                await budget.call(f"GET {path}", functools.partial(_list_one, client, path))
            except BudgetSpent as exc:
                raise StartupError(ExitCode.API_UNREACHABLE,
                                   f"listing {res.crd_name} failed: {exc}") from None
            except ApiError as exc:
                if exc.status in (401, 403):
                    where = f"in namespace {ns}" if ns else "cluster-wide"
                    raise _refused(exc, f"listing {res.crd_name} {where}") from None
                raise StartupError(ExitCode.API_UNREACHABLE,
                                   f"listing {res.crd_name} failed: {exc}") from None
    log.info("required resources served",
             extra={"resources": [r.crd_name for r in required]})
