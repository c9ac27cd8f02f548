"""Build the cre-manager container image without a Docker daemon: mmdebstrap, then buildah.

A platform team deploys CRE from an image, and this machine has neither a Docker daemon nor a
registry, only Debian's packages and PyPI. So the image is made from parts a Debian mirror and
PyPI provide, reproducibly, and rebuilt only when one of its inputs changes:

1. Two minimal Debian root filesystems made by ``mmdebstrap`` (extract variant, no maintainer
   scripts, see ``image/rootfs-hook.sh``): ``runtime`` (python3.11 and the libraries it loads)
   and ``build`` (the same plus ``python3.11-venv``, whose pip installs the wheels). Their
   tarballs are cached under ``~/.cache/cre-image`` keyed on the package list and the hook, and
   imported into buildah's local storage as ``cre-base:<kind>-<key>``.
2. CRE's wheel (``pip wheel``, into ``dist/``).
3. ``buildah build`` of the ``Containerfile`` (plain Dockerfile syntax: ``docker build`` reads
   the same file) with those bases, tagged ``cre-manager:<version>``, the version being
   ``cre.__version__``; the image is skipped when one with the same input key exists.
4. ``buildah push`` to an OCI archive ``dist/cre-manager-<version>.oci.tar``.

Every buildah call uses the vfs storage driver and chroot isolation: both work as root without
overlayfs, user namespaces or a daemon.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
IMAGE_DIR: Final = REPO / "image"
DIST: Final = REPO / "dist"
CONTAINERFILE: Final = REPO / "Containerfile"
LOCK: Final = IMAGE_DIR / "requirements.lock"
HOOK: Final = IMAGE_DIR / "rootfs-hook.sh"
NAME: Final = "cre-manager"
LICENSE: Final = "Apache-2.0"
KEY_LABEL: Final = "dev.cre.image.inputs"
STORAGE: Final = ("--storage-driver", "vfs")
ISOLATION: Final = ("--isolation", "chroot")

# The command each step needs, and the Debian package that provides it.
TOOLS: Final = {"buildah": "buildah", "mmdebstrap": "mmdebstrap", "runc": "runc"}

SUITE: Final = "bookworm"
GLIBC_MINOR: Final = 36  # bookworm's glibc 2.36: the newest manylinux tag its Python runs
MIRRORS: Final = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
# Bump when rootfs_tarball's post-processing changes (the hook and package list are hashed).
ROOTFS_REVISION: Final = "2"
# base-files: /etc/os-release; netbase: /etc/services and /etc/protocols (getaddrinfo).
RUNTIME_PACKAGES: Final = ("base-files", "netbase", "python3.11-minimal", "libpython3.11-stdlib")
BASES: Final = {
    "runtime": RUNTIME_PACKAGES,
    "build": (*RUNTIME_PACKAGES, "python3.11-venv"),
}
# Left behind by mmdebstrap's own set-up (apt's configuration and state, the stand-in
# start-stop-daemon), or written by the runtime at start (hostname, resolv.conf: kept empty).
_LEFTOVERS: Final = ("etc/apt", "var/lib/apt", "var/cache/apt", "var/log/apt",
                     "var/lib/dpkg/status",
                     "var/lib/dpkg/arch", "sbin/start-stop-daemon", "etc/dpkg/dpkg.cfg.d")
_EMPTIED: Final = ("etc/resolv.conf", "etc/hostname")


class ImageError(RuntimeError):
    """A step of the image build failed; the message says which and why."""


class ToolsMissing(ImageError):
    """buildah/mmdebstrap/runc are not installed and cannot be installed here."""

    def __init__(self, packages: Sequence[str], why: str) -> None:
        self.packages = tuple(packages)
        super().__init__(f"missing Debian package(s) {', '.join(packages)} ({why}); install "
                         f"them with: apt-get install {' '.join(packages)}")


def cache_dir() -> Path:
    """``$CRE_IMAGE_CACHE``, else ``$XDG_CACHE_HOME/cre-image``, else ``~/.cache/cre-image``."""
    if os.environ.get("CRE_IMAGE_CACHE"):
        return Path(os.environ["CRE_IMAGE_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cre-image"


def version() -> str:
    """The package version: ``__version__`` in cre/__init__.py, the one source of truth
    (pyproject.toml reads it through hatch; deploy/ must name the same tag)."""
    text = (REPO / "cre" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if not m:
        raise ImageError("cre/__init__.py has no __version__ = \"...\" line")
    return m.group(1)


def image_ref(ver: str | None = None) -> str:
    return f"{NAME}:{ver or version()}"


def archive_path(ver: str | None = None) -> Path:
    return DIST / f"{NAME}-{ver or version()}.oci.tar"


# ---------------------------------------------------------------------------------- tools


def missing_packages() -> list[str]:
    return sorted({pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None})


def ensure_tools(*, install: bool = True) -> None:
    """Install the missing Debian packages with apt-get (as root), else :class:`ToolsMissing`."""
    missing = missing_packages()
    if not missing:
        return
    if not install:
        raise ToolsMissing(missing, "not installed")
    if shutil.which("apt-get") is None:
        raise ToolsMissing(missing, "not installed, and this is not a Debian-like system")
    if os.geteuid() != 0:
        raise ToolsMissing(missing, "not installed, and installing them needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"image: installing {' '.join(missing)} with apt-get", file=sys.stderr)
    cmd = ["apt-get", "install", "-y", "-q", *missing]
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL,
                       check=False)
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ToolsMissing(missing, f"apt-get failed: {result.stderr.strip()[-500:]}")
    still = missing_packages()
    if still:
        raise ToolsMissing(still, "apt-get installed nothing that provides them")


def _run(argv: Sequence[str], *, what: str, cwd: Path | None = None,
         env: dict[str, str] | None = None, quiet: bool = True) -> str:
    result = subprocess.run(list(argv), capture_output=quiet, text=True, cwd=cwd,
                            env=env, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout or "").strip()[-3000:] if quiet else ""
        raise ImageError(f"{what} failed (exit {result.returncode}): {' '.join(argv)}\n"
                         f"{detail}")
    return result.stdout if quiet else ""


def buildah(*args: str, what: str = "buildah", quiet: bool = True) -> str:
    """One buildah call on the vfs storage driver."""
    return _run(["buildah", *STORAGE, *args], what=what, quiet=quiet)


def image_labels(ref: str) -> dict[str, str] | None:
    """The labels of a local image, or None when there is no such image."""
    result = subprocess.run(["buildah", *STORAGE, "inspect", "--type", "image", ref],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None
    doc = json.loads(result.stdout)
    labels = (doc.get("OCIv1", {}).get("config") or {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def image_id(ref: str) -> str | None:
    result = subprocess.run(["buildah", *STORAGE, "inspect", "--type", "image", "--format",
                             "{{.FromImageID}}", ref], capture_output=True, text=True, check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def image_config(ref: str) -> dict[str, Any]:
    """The OCI image config (``config`` section: Entrypoint, Env, User, Labels, ...)."""
    doc = json.loads(buildah("inspect", "--type", "image", ref, what=f"inspect {ref}"))
    config: dict[str, Any] = doc.get("OCIv1", {}).get("config") or {}
    return config


# ----------------------------------------------------------------------------- base images


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


def base_key(kind: str) -> str:
    """What the base's content depends on: suite, mirrors, packages and the hook."""
    return _digest(ROOTFS_REVISION, SUITE, *MIRRORS, *BASES[kind], HOOK.read_bytes())[:12]


def base_ref(kind: str) -> str:
    return f"localhost/cre-base:{kind}-{base_key(kind)}"


def rootfs_tarball(kind: str) -> Path:
    """The base root filesystem as a tarball, made by mmdebstrap once per key (cached)."""
    tar = cache_dir() / f"rootfs-{kind}-{base_key(kind)}.tar"
    if tar.is_file():
        return tar
    tar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"cre-rootfs-{kind}-", dir=tar.parent) as tmp:
        root = Path(tmp) / "root"
        print(f"image: mmdebstrap {kind} root filesystem ({', '.join(BASES[kind])})",
              file=sys.stderr)
        _run(["mmdebstrap", "--variant=extract", "--mode=root", "--quiet",
              f"--include={','.join(BASES[kind])}",
              f"--extract-hook={HOOK} \"$1\"", SUITE, str(root), *MIRRORS],
             what=f"mmdebstrap ({kind} base)")
        for rel in _LEFTOVERS:
            path = root / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        for node in (root / "dev").iterdir():  # the runtime provides /dev
            if node.is_dir() and not node.is_symlink():
                shutil.rmtree(node)
            else:
                node.unlink()
        for rel in _EMPTIED:
            (root / rel).write_bytes(b"")
        partial = Path(tmp) / "rootfs.tar"
        _run(["tar", "--create", "--file", str(partial), "--sort=name", "--numeric-owner",
              "--xattrs", "--mtime=@0", "--clamp-mtime", "-C", str(root), "."],
             what="tar of the root filesystem")
        partial.replace(tar)
    return tar


def base_image(kind: str) -> str:
    """``cre-base:<kind>-<key>`` in buildah's storage, imported from the cached tarball."""
    ref = base_ref(kind)
    if image_labels(ref) is not None:
        return ref
    tar = rootfs_tarball(kind)
    ctr = buildah("from", "--quiet", "scratch", what="buildah from scratch").strip()
    try:
        buildah("add", ctr, str(tar), "/", what=f"import {tar}")
        buildah("config", "--cmd", '["/usr/bin/python3"]', "--env", "LANG=C.UTF-8",
                "--label", f"org.opencontainers.image.title=cre-base {kind}",
                "--label", f"{KEY_LABEL}={base_key(kind)}", ctr, what="configure the base")
        buildah("commit", "--quiet", "--rm", ctr, ref, what=f"commit {ref}")
    except ImageError:
        subprocess.run(["buildah", *STORAGE, "rm", ctr], capture_output=True, check=False)
        raise
    return ref


# ------------------------------------------------------------------------------ the image


def build_wheel(ver: str) -> Path:
    """CRE's wheel in dist/ (hatchling writes reproducible wheels: same sources, same bytes)."""
    DIST.mkdir(exist_ok=True)
    wheel = DIST / f"cre-{ver}-py3-none-any.whl"
    with tempfile.TemporaryDirectory(prefix="cre-wheel-") as tmp:
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", tmp,
              str(REPO)], what="pip wheel")
        built = Path(tmp) / wheel.name
        if not built.is_file():
            found = ", ".join(p.name for p in Path(tmp).iterdir())
            raise ImageError(f"pip wheel made {found or 'nothing'}, expected {wheel.name}: "
                             "does pyproject.toml take its version from cre/__init__.py?")
        shutil.move(str(built), wheel)
    return wheel


def source() -> str:
    """The source label: ``$CRE_IMAGE_SOURCE``, else the git remote ``origin``, else unknown."""
    if os.environ.get("CRE_IMAGE_SOURCE"):
        return os.environ["CRE_IMAGE_SOURCE"]
    result = subprocess.run(["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
                            capture_output=True, text=True, check=False)
    return result.stdout.strip() or "unknown"


def _platform_args(arch: str) -> list[str]:
    """pip's ``--platform`` for every manylinux tag that bookworm's glibc 2.36 runs (pip does
    not expand one tag into the older ones it implies)."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(GLIBC_MINOR, 4, -1)]
    tags += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return [arg for tag in tags for arg in ("--platform", tag)]


def wheelhouse() -> Path:
    """The lock file's wheels for the image's Python (cp311, glibc 2.36, this machine's
    architecture), downloaded on the host with their hashes checked and cached per lock file,
    then copied to dist/wheels/ for the build context. The image build itself never reaches
    PyPI: it installs offline, so it needs no CA certificates and no proxy settings."""
    arch = os.uname().machine
    lock_key = _digest(LOCK.read_bytes(), arch)[:12]
    cached = cache_dir() / f"wheels-{lock_key}"
    if not (cached / ".complete").is_file():
        # Per process: two builds at once (two checkouts on one machine) must not empty each
        # other's download; the last one to finish replaces an equal wheelhouse.
        partial = cached.with_name(f"{cached.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        print(f"image: pip download the pinned wheels ({LOCK.relative_to(REPO)})", file=sys.stderr)
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
              "--require-hashes", "--only-binary", ":all:", "--python-version", "3.11",
              "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none",
              *_platform_args(arch), "--dest", str(partial), "-r", str(LOCK)],
             what="pip download (the lock file's wheels)",
             env={**os.environ, "PIP_FIND_LINKS": ""})
        (partial / ".complete").write_text(LOCK.read_text())
        if (cached / ".complete").is_file():  # another build finished the same lock first
            shutil.rmtree(partial, ignore_errors=True)
        else:
            shutil.rmtree(cached, ignore_errors=True)
            partial.replace(cached)
    target = DIST / "wheels"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for wheel in cached.glob("*.whl"):
        shutil.copy2(wheel, target / wheel.name)
    return target


def revision() -> str:
    """The git commit the image is built from (``+dirty`` with uncommitted changes)."""
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--",
                                "cre", "cre_manager", "catalog", "pyproject.toml", "image",
                                "Containerfile"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def inputs_key(*, wheel: Path, bases: dict[str, str], rev: str) -> str:
    """Everything the image is made from; an image with this key needs no rebuild."""
    return _digest(wheel.read_bytes(), LOCK.read_bytes(), CONTAINERFILE.read_bytes(),
                   (IMAGE_DIR / "install.py").read_bytes(), bases["build"], bases["runtime"],
                   rev, source())[:16]


def build_image(*, archive: bool = True, force: bool = False) -> str:
    """``cre-manager:<version>`` in buildah's storage (and its OCI archive); returns the ref."""
    ensure_tools()
    ver = version()
    ref = image_ref(ver)
    bases = {kind: base_image(kind) for kind in BASES}
    wheel = build_wheel(ver)
    wheelhouse()
    rev = revision()
    key = inputs_key(wheel=wheel, bases=bases, rev=rev)
    labels = image_labels(ref)
    if force or labels is None or labels.get(KEY_LABEL) != key:
        old = image_id(ref)
        print(f"image: buildah build {ref}", file=sys.stderr)
        # No --layers: every intermediate layer is a full copy on vfs; the whole image is
        # cached instead, by the key of its inputs.
        buildah("build", *ISOLATION, "--quiet", "--no-cache", "--force-rm",
                "--file", str(CONTAINERFILE),
                "--build-arg", f"BUILD_BASE={bases['build']}",
                "--build-arg", f"RUNTIME_BASE={bases['runtime']}",
                "--build-arg", f"VERSION={ver}", "--build-arg", f"REVISION={rev}",
                "--build-arg", f"SOURCE={source()}",
                "--label", f"{KEY_LABEL}={key}", "--tag", ref, str(REPO),
                what=f"buildah build {ref}")
        if old and old != image_id(ref):
            # The replaced image (now untagged) would keep its full vfs copy on disk.
            subprocess.run(["buildah", *STORAGE, "rmi", old], capture_output=True, check=False)
    if archive:
        write_archive(ref, archive_path(ver), key=key)
    return ref


def write_archive(ref: str, path: Path, *, key: str) -> Path:
    """The image as a (gzip-compressed layers) OCI archive; rewritten only for a new key."""
    stamp = path.with_suffix(".key")
    if path.is_file() and stamp.is_file() and stamp.read_text() == key:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    buildah("push", "--quiet", ref, f"oci-archive:{partial}:{ref}", what=f"push {ref} to {path}")
    partial.replace(path)
    stamp.write_text(key)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m image", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("tools", help="install buildah, mmdebstrap and runc when missing")
    sub.add_parser("bases", help="the two base images (cached root filesystems)")
    build = sub.add_parser("build", help=f"{NAME}:<version> and its OCI archive in dist/")
    build.add_argument("--force", action="store_true", help="rebuild even if inputs match")
    sub.add_parser("context", help="what `docker build` needs: the two root filesystem "
                   "tarballs (mmdebstrap only), dist/cre-<version>-*.whl and dist/wheels/")
    sub.add_parser("version", help="the image tag's version")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "version":
            print(version())
        elif args.cmd == "context":
            if shutil.which("mmdebstrap") is None:
                raise ToolsMissing(["mmdebstrap"], "not installed")
            for kind in BASES:
                print(f"{kind}: {rootfs_tarball(kind)}")
            print(f"wheel: {build_wheel(version())}")
            print(f"wheels: {wheelhouse()}")
        elif args.cmd == "tools":
            ensure_tools()
        elif args.cmd == "bases":
            ensure_tools()
            for kind in BASES:
                print(base_image(kind))
        else:
            ref = build_image(force=args.force)
            print(f"{ref} (buildah --storage-driver vfs images), {archive_path()}")
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
