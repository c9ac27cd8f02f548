"""Building the real control plane's binaries once per machine, from pinned Go modules.

The test tier's oracle is a real etcd and kube-apiserver (plus the controller-manager and the
scheduler). Their release binaries live in a bucket these machines cannot reach, but their Go
modules are served by the module proxy, so ``tools/controlplane/`` holds tiny Go modules of
our own (a ``main`` each and a ``go.mod`` pinning the upstream versions) and this module builds
them into a versioned cache directory that every test run and CI job on the machine reuses.
KWOK (fake nodes and pod lifecycles) is a third module with its own, newer k8s.io libraries and
its own cache directory (``kwok-v0.8.0``), built by :func:`ensure_kwok_built`.

The versions are read from the ``go.mod`` files, so the pin lives in one place; the cache
directory is named after them (``k8s-1.34.4-etcd-3.6.16``) and a stamp with the hash of the
sources decides whether a present build is current. A machine without Go, or without a module
proxy, gets a :class:`Unavailable` naming what is missing, which tests turn into a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / "tools" / "controlplane"
KUBE_MODULE = TOOLS / "kube"
ETCD_MODULE = TOOLS / "etcd"
KWOK_MODULE = TOOLS / "kwok"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
"""The names ``bin/kube`` (one multi-call binary) is linked under."""


class Unavailable(RuntimeError):
    """The control plane cannot be built or run here; the message names what is missing."""


@attrs.frozen
class Versions:
    """The upstream versions pinned by ``tools/controlplane/*/go.mod``."""

    kubernetes: str
    etcd: str

    @property
    def label(self) -> str:
        return f"k8s-{self.kubernetes.lstrip('v')}-etcd-{self.etcd.lstrip('v')}"


@attrs.frozen
class Binaries:
    """Paths of a complete build."""

    bin_dir: Path
    versions: Versions

    @property
    def etcd(self) -> Path:
        return self.bin_dir / "etcd"

    @property
    def kube(self) -> Path:
        return self.bin_dir / "kube"

    def component(self, name: str) -> Path:
        """``kube-apiserver``, ``kube-controller-manager`` or ``kube-scheduler``."""
        if name not in COMPONENTS:
            raise ValueError(f"unknown control-plane component {name!r}; one of {COMPONENTS}")
        return self.bin_dir / name


@attrs.frozen
class BuildReport:
    """What :func:`ensure_built` did: ``built`` is False when the cache was reused."""

    binaries: Binaries
    built: bool
    seconds: float
    bin_bytes: int


@attrs.frozen
class KwokBinary:
    """A complete KWOK build: ``path`` is the binary, ``version`` the pinned module version."""

    path: Path
    version: str


@attrs.frozen
class KwokBuildReport:
    """What :func:`ensure_kwok_built` did: ``built`` is False when the cache was reused."""

    kwok: KwokBinary
    built: bool
    seconds: float
    bin_bytes: int


def required_version(go_mod: Path, module: str) -> str:
    """The version ``go_mod`` requires of ``module``; :class:`Unavailable` when it names none."""
    text = go_mod.read_text(encoding="utf-8")
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise Unavailable(f"{go_mod} does not require {module}")
    return match.group(1)


def versions() -> Versions:
    """The pinned versions, read from the ``go.mod`` files."""
    if not TOOLS.is_dir():
        raise Unavailable(f"{TOOLS} is missing (the control plane builds from a source checkout)")
    return Versions(kubernetes=required_version(KUBE_MODULE / "go.mod", "k8s.io/kubernetes"),
                    etcd=required_version(ETCD_MODULE / "go.mod", "go.etcd.io/etcd/server/v3"))


def cache_root() -> Path:
    """``$CRE_CONTROLPLANE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/cre/controlplane``."""
    override = os.environ.get("CRE_CONTROLPLANE_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "cre" / "controlplane"


def modules_digest(modules: tuple[Path, ...], ldflags: str) -> str:
    """A digest of the modules' go.mod, go.sum and main.go and the link flags (a build stamp)."""
    digest = hashlib.sha256()
    for module in modules:
        for name in ("go.mod", "go.sum", "main.go"):
            path = module / name
            digest.update(f"{module.name}/{name}\0".encode())
            digest.update(path.read_bytes() if path.is_file() else b"")
    digest.update(ldflags.encode())
    return digest.hexdigest()[:16]


def source_digest() -> str:
    """A hash of everything the etcd and kube builds read from the repository."""
    return modules_digest((KUBE_MODULE, ETCD_MODULE), _ldflags(versions()))


KWOK_LDFLAGS = "-s -w"


def kwok_version() -> str:
    """The pinned ``sigs.k8s.io/kwok`` version, read from ``tools/controlplane/kwok/go.mod``."""
    if not KWOK_MODULE.is_dir():
        raise Unavailable(f"{KWOK_MODULE} is missing (KWOK builds from a source checkout)")
    return required_version(KWOK_MODULE / "go.mod", "sigs.k8s.io/kwok")


def kwok_digest() -> str:
    """A hash of everything the KWOK build reads from the repository."""
    return modules_digest((KWOK_MODULE,), KWOK_LDFLAGS)


def _kwok_bin_dir(version: str) -> Path:
    return cache_root() / f"kwok-{version}" / "bin"


def locate_kwok() -> KwokBinary | None:
    """The current KWOK build if it is complete and its stamp current, else None."""
    version = kwok_version()
    bin_dir = _kwok_bin_dir(version)
    stamp = bin_dir / ".source"
    if (bin_dir / "kwok").is_file() and stamp.is_file() \
            and stamp.read_text().strip() == kwok_digest():
        return KwokBinary(path=bin_dir / "kwok", version=version)
    return None


def locate() -> Binaries | None:
    """The current build if it is complete, else None (never builds)."""
    pinned = versions()
    bin_dir = cache_root() / pinned.label / "bin"
    stamp = bin_dir / ".source"
    binaries = Binaries(bin_dir=bin_dir, versions=pinned)
    names = [binaries.etcd, binaries.kube, *(binaries.component(c) for c in COMPONENTS)]
    if all(p.exists() for p in names) and stamp.is_file() \
            and stamp.read_text().strip() == source_digest():
        return binaries
    return None


def go_tool() -> str:
    """The ``go`` command, or :class:`Unavailable` naming what is missing."""
    go = shutil.which("go")
    if go is None:
        raise Unavailable("the Go toolchain (`go` on PATH, 1.24 or newer) is not installed; "
                          "the real control plane is built from Go modules")
    return go


def _run(argv: list[str], *, cwd: Path, what: str) -> None:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False,
                            env={**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"})
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        if "proxy" in tail or "dial tcp" in tail or "no such host" in tail:
            proxy = os.environ.get("GOPROXY") or "the default GOPROXY"
            raise Unavailable(f"{what} needs the Go module proxy ({proxy}), which did not "
                              f"answer:\n{tail}")
        raise RuntimeError(f"{what} failed (exit {result.returncode}):\n{tail}")


def ensure_built(*, jobs: int = 2, log: bool = False) -> BuildReport:
    """Build etcd and the multi-call ``kube`` binary into the cache unless current.

    Builds run under ``nice -n 10`` with at most ``jobs`` parallel compilations and stripped
    (``-trimpath -ldflags='-s -w'``); the result is moved into place only when complete.
    """
    started = time.monotonic()
    found = locate()
    if found is not None:
        return BuildReport(binaries=found, built=False, seconds=0.0,
                           bin_bytes=folder_bytes(found.bin_dir))
    pinned = versions()
    final = cache_root() / pinned.label / "bin"
    built = build_into(final, [(ETCD_MODULE, "etcd", "-s -w"),
                                (KUBE_MODULE, "kube", _ldflags(pinned))],
                        links=COMPONENTS, stamp=source_digest(), jobs=jobs, label=pinned.label,
                        log=log)
    binaries = Binaries(bin_dir=final, versions=pinned)
    return BuildReport(binaries=binaries, built=built, seconds=time.monotonic() - started,
                       bin_bytes=folder_bytes(final))


def ensure_kwok_built(*, jobs: int = 2, log: bool = False) -> KwokBuildReport:
    """Build KWOK (``tools/controlplane/kwok``) into ``<cache>/kwok-<version>/bin`` unless the
    build there is current; same rules as :func:`ensure_built` (nice, ``-p jobs``, stripped,
    moved into place only when complete, :class:`Unavailable` without Go or its proxy)."""
    started = time.monotonic()
    found = locate_kwok()
    if found is not None:
        return KwokBuildReport(kwok=found, built=False, seconds=0.0,
                               bin_bytes=found.path.stat().st_size)
    version = kwok_version()
    final = _kwok_bin_dir(version)
    built = build_into(final, [(KWOK_MODULE, "kwok", KWOK_LDFLAGS)], links=(),
                        stamp=kwok_digest(), jobs=jobs, label=f"kwok-{version}", log=log)
    kwok = KwokBinary(path=final / "kwok", version=version)
    return KwokBuildReport(kwok=kwok, built=built, seconds=time.monotonic() - started,
                           bin_bytes=kwok.path.stat().st_size)


@contextlib.contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """One build at a time into ``folder`` (pytest-xdist workers, ``make controlplane`` and a
    test session on one machine share the cache): an exclusive lock on ``folder/.build.lock``,
    released when the holder exits, even by a crash."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".build.lock", "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _current(final: Path, outputs: list[tuple[Path, str, str]], stamp: str) -> bool:
    marker = final / ".source"
    return marker.is_file() and marker.read_text().strip() == stamp \
        and all((final / output).is_file() for _, output, _ in outputs)


def build_into(final: Path, outputs: list[tuple[Path, str, str]], *, links: tuple[str, ...],
                stamp: str, jobs: int, label: str, log: bool) -> bool:
    """``go build`` each (module, output, ldflags) into a staging folder next to ``final``,
    add the ``links`` to the last output and the stamp, then swap the folder into place.

    Under :func:`build_lock`: a build that another process finished while this one waited is
    taken as it is (False); True when this call built."""
    go = go_tool()
    with build_lock(final.parent):
        if _current(final, outputs, stamp):
            return False
        _build_unlocked(go, final, outputs, links=links, stamp=stamp, jobs=jobs, label=label,
                        log=log)
        return True


def _build_unlocked(go: str, final: Path, outputs: list[tuple[Path, str, str]], *,
                    links: tuple[str, ...], stamp: str, jobs: int, label: str,
                    log: bool) -> None:
    staging = Path(tempfile.mkdtemp(prefix="bin-", dir=final.parent))
    staging.chmod(0o755)
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    try:
        for module, output, ldflags in outputs:
            if log:
                print(f"controlplane: building {output} from {module.relative_to(REPO)} "
                      f"({label})", flush=True)
            _run([*nice, go, "mod", "download"], cwd=module,
                 what=f"downloading the modules of {module.relative_to(REPO)}")
            _run([*nice, go, "build", "-p", str(jobs), "-trimpath", f"-ldflags={ldflags}",
                  "-o", str(staging / output), "."], cwd=module, what=f"go build of {output}")
        for link in links:
            (staging / link).symlink_to(outputs[-1][1])
        (staging / ".source").write_text(stamp + "\n")
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _ldflags(pinned: Versions) -> str:
    """Stripped, with the version stamps upstream's build sets (``/version``, user agents)."""
    major, minor = pinned.kubernetes.lstrip("v").split(".")[:2]
    stamps = {"gitVersion": pinned.kubernetes, "gitMajor": major, "gitMinor": minor,
              "gitTreeState": "clean"}
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{k}={v}" for k, v in stamps.items()]
    return " ".join(flags)


def folder_bytes(folder: Path) -> int:
    """The bytes of the regular files directly in ``folder`` (links not counted)."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and not p.is_symlink())
