"""The image's inputs agree: one version everywhere, a lock file that matches pyproject.toml.

The version lives in cre/__init__.py; the wheel (through hatch), the image tag (``make image``)
and deploy/ (the kustomize image tag and the Deployment's image) must all say the same, or a
cluster would run another build than the one just made. The lock file is generated (``make
lock``); when pyproject.toml's dependencies change and the lock is not regenerated, this says so
instead of the image silently missing or carrying a dependency. No buildah needed here.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from ruamel.yaml import YAML

import cre

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from image.build import LOCK, image_ref, version  # noqa: E402

DEPLOY = REPO / "deploy"


def _yaml(path: Path) -> dict:  # type: ignore[type-arg]
    doc: dict = YAML(typ="safe").load(path.read_text(encoding="utf-8"))  # type: ignore[type-arg]
    return doc


def test_one_version_package_wheel_image_and_deploy() -> None:
    kustomization = _yaml(DEPLOY / "default" / "kustomization.yaml")
    tags = {i["name"]: i["newTag"] for i in kustomization["images"]}
    deployment = _yaml(DEPLOY / "manager" / "deployment.yaml")
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert version() == cre.__version__
    assert importlib.metadata.version("cre") == cre.__version__, (
        "the installed metadata is stale: pip install -e . again")
    assert image_ref() == f"cre-manager:{cre.__version__}"
    assert tags == {"cre-manager": cre.__version__}, (
        f"deploy/default/kustomization.yaml tags {tags}, the package is {cre.__version__}")
    assert images == [f"cre-manager:{cre.__version__}"], images
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"], "the version belongs in cre/__init__.py only"
    assert pyproject["tool"]["hatch"]["version"]["path"] == "cre/__init__.py"


def _lock() -> tuple[dict[str, Version], set[str]]:
    """(pins, names pinned because pyproject.toml asks for them directly)."""
    pins: dict[str, Version] = {}
    direct: set[str] = set()
    current = ""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)", line)
        if m:
            current = canonicalize_name(m.group(1))
            pins[current] = Version(m.group(2))
        via = re.match(r"^\s+#\s+(?:via\s+)?(.*)$", line)
        if via and current and "cre (pyproject.toml)" in via.group(1):
            direct.add(current)
    return pins, direct


def test_lock_pins_exactly_the_base_dependencies() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = {canonicalize_name(Requirement(r).name): Requirement(r)
              for r in pyproject["project"]["dependencies"]}
    pins, direct = _lock()
    assert direct == set(wanted), (
        f"image/requirements.lock is stale (missing {sorted(set(wanted) - direct)}, no longer "
        f"wanted {sorted(direct - set(wanted))}): run `make lock` and commit it")
    for name, req in wanted.items():
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"image/requirements.lock pins {name}=={pins[name]}, pyproject.toml wants "
            f"{req}: run `make lock`")
    lines = LOCK.read_text(encoding="utf-8").splitlines()
    unhashed = [line for line, after in zip(lines, [*lines[1:], ""], strict=True)
                if re.match(r"^[A-Za-z0-9]", line) and not after.strip().startswith("--hash=")]
    assert not unhashed, f"pins without hashes: {unhashed}"


def test_containerfile_user_entrypoint_and_labels() -> None:
    text = (REPO / "Containerfile").read_text(encoding="utf-8")
    final = text[text.rindex("\nFROM "):]
    assert 'ENTRYPOINT ["cre-manager"]' in final
    assert "USER 65532:65532" in final
    for label in ("version", "revision", "source", "licenses"):
        assert f"org.opencontainers.image.{label}=" in final, label
    assert "RUN " not in final, "the runtime stage has no shell to RUN anything with"


def test_missing_tools_name_their_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where buildah etc. cannot be installed (not root), the error names the packages; the
    image tests skip with this message."""
    import image.build as build

    # Every other tool present, whatever this machine has (make test-fast installs nothing).
    monkeypatch.setattr(build.shutil, "which",
                        lambda cmd: None if cmd in ("buildah", "runc") else f"/usr/bin/{cmd}")
    monkeypatch.setattr(build.os, "geteuid", lambda: 1000)
    with pytest.raises(build.ToolsMissing) as err:
        build.ensure_tools()
    assert err.value.packages == ("buildah", "runc")
    assert "apt-get install buildah runc" in str(err.value)
    assert "needs root" in str(err.value)
    with pytest.raises(build.ToolsMissing, match="not installed"):
        build.ensure_tools(install=False)
