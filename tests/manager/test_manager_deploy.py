"""The kustomize deployment: renders, is least-privilege and restricted, and applies."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cre.api.crdgen import render_all
from cre.controller.registry import BY_NAME
from cre.testing.procs import REPO, Stack
from cre_manager.config import parse_config
from cre_manager.controllers import required_resources

DEPLOY = REPO / "deploy"


def _kustomize(folder: str) -> list[dict[str, Any]]:
    out = subprocess.run(["kubectl", "kustomize", str(DEPLOY / folder)], capture_output=True,
                         text=True, check=True).stdout
    return [d for d in YAML(typ="safe").load_all(out) if d]


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind
             and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return _kustomize("default")


def test_default_renders_everything(default: list[dict[str, Any]]) -> None:
    """deploy/default holds the CRDs, namespace, identity, RBAC, Deployment, Service, the
    shipped LogProfiles and the low PriorityClass (cluster-scoped: no namespace)."""
    kinds = sorted({d["kind"] for d in default})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                     "Deployment", "LogProfile", "Namespace", "PriorityClass", "Role",
                     "RoleBinding", "Service", "ServiceAccount"]
    for doc in default:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                               "Namespace", "LogProfile", "PriorityClass"):
            assert doc["metadata"]["namespace"] == "cre-system", doc["metadata"]["name"]


def test_the_shipped_priority_class_is_low_and_preemptible(
        default: list[dict[str, Any]]) -> None:
    """cre-certification-low sits below the default priority (0) and is nobody's default, so
    any ordinary pod may preempt a certification pod; no namespace is stamped on it."""
    (pc,) = [d for d in default if d["kind"] == "PriorityClass"]
    assert pc["metadata"]["name"] == "cre-certification-low"
    assert "namespace" not in pc["metadata"]
    assert pc["value"] < 0 and pc["globalDefault"] is False
    assert pc["preemptionPolicy"] == "PreemptLowerPriority"


def test_default_ships_the_log_profiles(default: list[dict[str, Any]]) -> None:
    """The real ``kubectl kustomize deploy/default`` carries every LogProfile CRE ships,
    exactly as shipped_profiles() serialises them, without a namespace (cluster-scoped)."""
    from cre.api.converter import to_dict
    from cre.core.measure.goodputprofiles import megatron_profile
    from cre.core.measure.logprofile import shipped_profiles

    rendered = {d["metadata"]["name"]: d for d in default if d["kind"] == "LogProfile"}
    shipped = [*shipped_profiles(), megatron_profile()]
    assert sorted(rendered) == sorted(p.metadata.name or "" for p in shipped)
    for profile in shipped:
        doc = rendered[profile.metadata.name or ""]
        assert "namespace" not in doc["metadata"]
        assert doc["spec"] == to_dict(profile)["spec"], profile.metadata.name


def test_crd_kustomization_lists_the_generated_crds() -> None:
    """deploy/crds/kustomization.yaml names exactly the files crdgen writes."""
    kustomization = YAML(typ="safe").load((DEPLOY / "crds" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(render_all())


def test_monitoring_adds_a_service_monitor_rules_and_a_dashboard(
        default: list[dict[str, Any]]) -> None:
    """deploy/monitoring = deploy/default + a ServiceMonitor on the metrics port, the
    PrometheusRule and the Grafana dashboard ConfigMap (labelled for the sidecar), all three
    in cre-system."""
    monitoring = _kustomize("monitoring")
    assert len(monitoring) == len(default) + 3
    monitor = _one(monitoring, "ServiceMonitor")
    service = _one(default, "Service", "cre-manager-metrics")
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    rule = _one(monitoring, "PrometheusRule", "cre-manager")
    dashboard = _one(monitoring, "ConfigMap", "cre-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(dashboard["data"]) == ["cre-fleet.json"]
    for obj in (monitor, rule, dashboard):
        assert obj["metadata"]["namespace"] == "cre-system"


def test_deployment_is_restricted(default: list[dict[str, Any]]) -> None:
    """Non-root, read-only root FS, no capabilities, RuntimeDefault seccomp, no escalation."""
    pod = _one(default, "Deployment", "cre-manager")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == "cre-manager"


def test_probes_and_args_match_the_manager(default: list[dict[str, Any]],
                                           kubeconfig: Path) -> None:
    """Probes hit /healthz and /readyz on the health port; the args are valid manager flags."""
    (container,) = _one(default, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    cfg = parse_config(container["args"], {"KUBECONFIG": str(kubeconfig)})
    assert cfg.health_address is not None and cfg.health_address.port == ports["health"] == 8081
    assert cfg.metrics_address is not None and cfg.metrics_address.port == ports["http-metrics"]
    assert cfg.leader_election is not None


def _rules(doc: dict[str, Any]) -> list[tuple[str, str, frozenset[str]]]:
    return [(group, resource, frozenset(rule["verbs"])) for rule in doc["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"]]


def test_rbac_is_least_privilege(default: list[dict[str, Any]]) -> None:
    """Pods read-only, logs get-only, nodes patched (never updated), no secrets, leases only
    through the namespaced Role."""
    cluster = _rules(_one(default, "ClusterRole", "cre-manager"))
    by_resource = {(g, r): v for g, r, v in cluster}
    assert not any(r.startswith(("secrets", "leases", "*")) for _, r, _ in cluster)
    assert not any("*" in v for _, _, v in cluster)
    assert by_resource[("", "pods")] == {"list", "watch"}
    assert by_resource[("", "pods/log")] == {"get"}
    assert by_resource[("", "nodes")] == {"list", "watch", "patch"}
    assert by_resource[("cre.dev", "nodecertifications")] == {"list", "watch", "create"}
    assert by_resource[("cre.dev", "reportexportpolicies")] == {"get", "list", "watch"}
    assert by_resource[("cre.dev", "reportexports")] == {"get", "list", "watch", "create",
                                                         "delete"}
    # create: one per transition; list: the Events of a workload that never started.
    assert by_resource[("", "events")] == {"create", "list"}
    assert not any(g == "events.k8s.io" for g, _, _ in cluster)
    assert by_resource[("trainer.kubeflow.org", "trainjobs")] == {
        "create", "get", "list", "watch", "delete"}
    assert by_resource[("cre.dev", "jobs/status")] == {"update"}
    assert by_resource[("cre.dev", "jobs/finalizers")] == {"update"}
    role = _one(default, "Role", "cre-manager-leader-election")
    assert role["metadata"]["namespace"] == "cre-system"
    assert _rules(role) == [("coordination.k8s.io", "leases",
                             frozenset({"get", "create", "update"}))]


def test_rbac_covers_what_the_start_up_checks_list(default: list[dict[str, Any]]) -> None:
    """Every resource the enabled controllers require is listable (the start-up check lists
    each; what else is needed is proved by the calls made in integration/e2e/test_e2e_rbac)."""
    by_resource = {(g, r): v for g, r, v in _rules(_one(default, "ClusterRole"))}
    for res in required_resources(tuple(BY_NAME)):
        assert "list" in by_resource[(res.group, res.plural)], res.crd_name


def test_apply_to_the_emulator() -> None:
    """``kubectl apply -k deploy/default`` succeeds against the API emulator."""
    with Stack() as stack:
        stack.start_emulator(crds=[])
        applied = stack.apply_kustomization(DEPLOY / "default")
        rendered = stack.kubectl("kustomize", str(DEPLOY / "default")).stdout
        kinds = sum(line.startswith("kind: ") for line in rendered.splitlines())
        assert applied.count(" created\n") == kinds, applied  # every object, once
        assert "logprofile.cre.dev/nccl-bandwidth created" in applied
        assert "deployment.apps/cre-manager created" in applied
        assert "customresourcedefinition.apiextensions.k8s.io/jobs.cre.dev created" in applied
        deployment = stack.kubectl_json("get", "deployment", "-n", "cre-system", "cre-manager")
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "cre-manager"


def test_logprofiles_apply_after_the_crds() -> None:
    """deploy/logprofiles applies once the CRDs are in: the shipped profiles exist."""
    with Stack() as stack:
        stack.start_emulator(crds=[])
        stack.kubectl("apply", "-k", str(DEPLOY / "crds"))
        stack.kubectl("wait", "--for", "condition=established", "--timeout", "20s",
                      "crd/logprofiles.cre.dev")
        result = stack.kubectl("apply", "-k", str(DEPLOY / "logprofiles"))
        assert "logprofile.cre.dev/nccl-bandwidth created" in result.stdout, result.stdout
        assert "logprofile.cre.dev/nccl-loopback created" in result.stdout
        assert "logprofile.cre.dev/megatron-training created" in result.stdout
