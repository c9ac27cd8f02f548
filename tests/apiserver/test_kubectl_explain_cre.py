"""`kubectl explain` on CRE's own kinds shows a description for every field (issue 24)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cre.api import crdgen
from cre.api.kinds import KINDS
from cre.testing.apiserver import Emulator

from .test_kubectl import Kubectl

pytestmark = pytest.mark.anyio

# `jobs` alone is batch/v1 Job: every call names CRE's group version.
API_VERSION = "--api-version=cre.dev/v1alpha1"


@pytest.fixture
async def kubectl(emu_crds: Emulator, tmp_path: Path) -> Kubectl:
    return Kubectl(emu_crds, tmp_path)


def _object_paths(node: dict[str, Any], path: str) -> Iterator[str]:
    """Dotted paths of every object node with properties (array items under the array)."""
    if node.get("type") == "array":
        node = node.get("items", {})
    if node.get("properties"):
        yield path
        for key, sub in node["properties"].items():
            yield from _object_paths(sub, f"{path}.{key}")


def _explained(kind: str) -> list[str]:
    info = next(i for i in KINDS if i.kind == kind)
    schema = crdgen.build_crd(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return [
        path
        for top in ("spec", "status")
        if top in schema["properties"]
        for path in _object_paths(schema["properties"][top], f"{info.plural}.{top}")
    ]


async def test_explain_certification_spec_describes_every_field(kubectl: Kubectl) -> None:
    """The issue's example: no field of certifications.spec, at any depth, is undescribed."""
    paths = _explained("Certification")
    assert "certifications.spec.categories.options.resources" in paths
    for path in paths:
        _, out, _ = await kubectl.run("explain", path, API_VERSION)
        assert "<no description>" not in out, f"kubectl explain {path}:\n{out}"
    _, out, _ = await kubectl.run("explain", "certifications.spec.nodesPerJob", API_VERSION)
    assert "Nodes in each group" in out and "At least 1." in out


@pytest.mark.parametrize("kind", [i.kind for i in KINDS if i.kind != "Certification"])
async def test_explain_spec_and_status_of_every_kind(kubectl: Kubectl, kind: str) -> None:
    """The spec and status of every other CRE kind list only described fields."""
    plural = next(i.plural for i in KINDS if i.kind == kind)
    for top in ("spec", "status"):
        if f"{plural}.{top}" in _explained(kind):
            _, out, _ = await kubectl.run("explain", f"{plural}.{top}", API_VERSION)
            assert f"KIND:       {kind}" in out and "VERSION:    v1alpha1" in out
            assert "FIELDS:" in out
            assert "<no description>" not in out, f"kubectl explain {plural}.{top}:\n{out}"
