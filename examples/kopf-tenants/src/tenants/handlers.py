"""The Tenant handlers: create, relabel and delete the tenant's Namespace."""

from __future__ import annotations

import os
from typing import Any

import kopf
import kubernetes
from kubernetes.client.rest import ApiException

OWNER = "tenants.example.dev/owner"
TENANT = "tenants.example.dev/tenant"


def namespace_of(name: str) -> str:
    return f"tenant-{name}"


def _labels(name: str, spec: Any) -> dict[str, str]:
    return {**dict(spec.get("labels") or {}), OWNER: str(spec["owner"]), TENANT: name}


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = "tenants.example.dev/namespace"
    # $KUBECONFIG as it is now (the client library reads it once, at import), else the default.
    kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))


@kopf.on.create("example.dev", "v1", "tenants")
def create_namespace(name: str, spec: Any, patch: kopf.Patch, body: Any, **_: Any) -> None:
    ns = namespace_of(name)
    api = kubernetes.client.CoreV1Api()
    try:
        api.create_namespace({"metadata": {"name": ns, "labels": _labels(name, spec)}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    patch.status["namespace"] = ns
    patch.status["phase"] = "Ready"
    kopf.info(body, reason="NamespaceCreated", message=f"namespace {ns} is ready")


@kopf.on.update("example.dev", "v1", "tenants", field="spec.labels")
def relabel(name: str, spec: Any, old: Any, new: Any, body: Any, **_: Any) -> None:
    removed = {k: None for k in (old or {}) if k not in (new or {})}
    kubernetes.client.CoreV1Api().patch_namespace(
        namespace_of(name), {"metadata": {"labels": {**removed, **_labels(name, spec)}}})
    kopf.info(body, reason="NamespaceRelabelled", message=f"labels: {sorted(new or {})}")


@kopf.on.delete("example.dev", "v1", "tenants")
def delete_namespace(name: str, body: Any, **_: Any) -> None:
    try:
        kubernetes.client.CoreV1Api().delete_namespace(namespace_of(name))
    except ApiException as exc:
        if exc.status != 404:
            raise
    kopf.info(body, reason="NamespaceDeleted", message=f"namespace {namespace_of(name)} deleted")
