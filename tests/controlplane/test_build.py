"""The build of the real control plane: pinned versions, cache layout, and the skip reasons.

These need no Go: they check what the build reads (the ``go.mod`` pins) and that a machine
without the toolchain gets an error naming it rather than a silent pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cre.testing.controlplane import build, workload_build
from cre.testing.controlplane.pytest_fixtures import skip_reason


def test_versions_are_pinned_by_the_go_modules() -> None:
    pinned = build.versions()
    assert pinned.kubernetes.startswith("v1.34.")
    assert pinned.etcd.startswith("v3.6.")
    assert pinned.label == (f"k8s-{pinned.kubernetes[1:]}-etcd-{pinned.etcd[1:]}")


def test_the_staging_modules_are_pinned_to_the_same_release() -> None:
    """k8s.io/kubernetes needs every staging module replaced by the matching v0 release."""
    text = (build.KUBE_MODULE / "go.mod").read_text()
    minor_patch = build.versions().kubernetes.removeprefix("v1.")
    replaced = [line.split() for line in text.splitlines() if "=> k8s.io/" in line]
    assert len(replaced) >= 25
    assert {parts[-1] for parts in replaced} == {f"v0.{minor_patch}"}
    assert all(parts[0] == parts[2] for parts in replaced)


def test_cache_dir_is_versioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRE_CONTROLPLANE_CACHE", str(tmp_path))
    assert build.cache_root() == tmp_path
    assert build.locate() is None  # nothing built there
    monkeypatch.delenv("CRE_CONTROLPLANE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_root() == tmp_path / "xdg" / "cre" / "controlplane"


# Every managed build: the plane (etcd + kube), KWOK, the JobSet and Trainer managers.
BUILDS = pytest.mark.parametrize("ensure", [build.ensure_built, build.ensure_kwok_built,
                                            workload_build.ensure_built],
                                 ids=["plane", "kwok", "workloads"])


@BUILDS
def test_missing_go_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             ensure: Callable[[], object]) -> None:
    monkeypatch.setenv("CRE_CONTROLPLANE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(build.Unavailable, match=r"Go toolchain \(`go` on PATH"):
        ensure()


@BUILDS
def test_unreachable_proxy_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    ensure: Callable[[], object]) -> None:
    """An empty module cache and a proxy that does not answer: Unavailable names the proxy."""
    if build.shutil.which("go") is None:
        pytest.skip("the Go toolchain is not installed")
    monkeypatch.setenv("CRE_CONTROLPLANE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "mod"))
    monkeypatch.setenv("GOPROXY", "http://127.0.0.1:9")
    with pytest.raises(build.Unavailable, match=r"Go module proxy \(http://127.0.0.1:9\)"):
        ensure()


def test_switch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRE_CONTROLPLANE", "0")
    assert skip_reason() == "the real control plane is switched off (CRE_CONTROLPLANE=0)"
    monkeypatch.setenv("CRE_CONTROLPLANE", "1")
    assert skip_reason() is None


def test_kwok_is_pinned_and_cached_apart(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """KWOK's pin comes from its go.mod; its build lives in kwok-<version>/bin with a stamp of
    its own sources, so it never invalidates (or is invalidated by) the plane's build."""
    assert build.kwok_version().startswith("v0.")
    assert build.kwok_digest() != build.source_digest()
    monkeypatch.setenv("CRE_CONTROLPLANE_CACHE", str(tmp_path))
    assert build.locate_kwok() is None
    bin_dir = tmp_path / f"kwok-{build.kwok_version()}" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "kwok").write_text("")
    (bin_dir / ".source").write_text("stale\n")
    assert build.locate_kwok() is None  # a stamp from other sources is not current
    (bin_dir / ".source").write_text(build.kwok_digest() + "\n")
    found = build.locate_kwok()
    assert found is not None and found.path == bin_dir / "kwok"
    assert build.ensure_kwok_built().built is False


def test_concurrent_builds_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builders of one output (two pytest-xdist workers, or make controlplane and a test
    run) build it once: the second waits on the cache's lock, then takes the finished build."""
    calls: list[str] = []
    inside = threading.Event()

    def fake_build(go: str, final: Path, outputs: list[tuple[Path, str, str]], *,
                   stamp: str, **_: object) -> None:
        calls.append(threading.current_thread().name)
        inside.set()
        time.sleep(0.2)  # hold the lock while the other builder arrives (not a timing assert)
        final.mkdir(parents=True)
        for _module, output, _flags in outputs:
            (final / output).write_text("binary")
        (final / ".source").write_text(stamp + "\n")

    monkeypatch.setattr(build, "go_tool", lambda: "go")
    monkeypatch.setattr(build, "_build_unlocked", fake_build)
    final = tmp_path / "k8s-x" / "bin"
    outputs = [(tmp_path, "kube", "-s -w")]
    results: dict[str, bool] = {}

    def builder() -> None:
        results[threading.current_thread().name] = build.build_into(
            final, outputs, links=(), stamp="digest", jobs=1, label="x", log=False)

    first = threading.Thread(target=builder, name="first")
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=builder, name="second")
    second.start()
    first.join(10)
    second.join(10)
    assert results == {"first": True, "second": False}
    assert calls == ["first"]
    assert (final.parent / ".build.lock").exists()
