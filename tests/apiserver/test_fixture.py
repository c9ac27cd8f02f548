"""The ``kube_emulator`` fixture that the CRE pytest plugin ships for users."""

from __future__ import annotations

import pytest

from cre.testing.apiserver import Emulator

pytestmark = pytest.mark.anyio


async def test_kube_emulator_fixture_serves_upstream_and_cre_crds(
    kube_emulator: Emulator,
) -> None:
    """The fixture installs Trainer and JobSet CRDs (and CRE's own when present)."""
    registry = kube_emulator.server.registry
    assert registry.get("trainer.kubeflow.org", "v1alpha1", "trainjobs") is not None
    assert registry.get("jobset.x-k8s.io", "v1alpha2", "jobsets") is not None
    assert kube_emulator.kubeconfig_path.name == "kubeconfig"
    assert kube_emulator.url.startswith("http://127.0.0.1:")
    assert kube_emulator.kubernetes_version == "1.33"
