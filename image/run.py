"""Run the built image as the Deployment's pod would, without a kubelet: buildah + runc.

The image test and ``python -m bench image`` must start the container the way a cluster does,
or a read-only root, an unprivileged user or missing capabilities would only break it in
production. ``buildah run`` cannot make the root filesystem read-only, so the container's root
filesystem comes from ``buildah from`` + ``buildah mount`` (a working container of the image)
and runc, the OCI runtime under containerd and CRI-O, runs it with a config derived from the
image's config and ``deploy/manager/deployment.yaml``: the container's command and args, its env,
the pod's and the container's securityContext (user and group, read-only root, no privilege
escalation, dropped capabilities) and the ``/tmp`` emptyDir as a tmpfs with its size limit.

Two differences from a pod: the host's network namespace (the API emulator listens on the
host's loopback) and no seccomp profile (RuntimeDefault is the runtime's, not the image's).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from ruamel.yaml import YAML

from cre.testing.procs import ManagerProc, wait_until
from image.build import REPO, STORAGE, ImageError, image_config

DEPLOYMENT: Final = REPO / "deploy" / "manager" / "deployment.yaml"
# containerd's default capability set: what a container keeps unless its securityContext drops.
DEFAULT_CAPS: Final = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
                       "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
                       "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")
_QUANTITY: Final = re.compile(r"^(\d+)(Ki|Mi|Gi)?$")
KUBECONFIG: Final = "/etc/cre/kubeconfig"


def deployment() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, manager container) of the shipped Deployment."""
    doc = YAML(typ="safe").load(DEPLOYMENT.read_text(encoding="utf-8"))
    pod: dict[str, Any] = doc["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "manager")
    return pod, container


def _bytes(quantity: str) -> int:
    m = _QUANTITY.match(quantity)
    if not m:
        raise ImageError(f"cannot read the quantity {quantity!r}")
    return int(m.group(1)) * {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, None: 1}[m.group(2)]


def buildah_cmd(*args: str) -> str:
    result = subprocess.run(["buildah", *STORAGE, *args], capture_output=True, text=True,
                            check=False, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise ImageError(f"buildah {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


class WorkingContainer:
    """``buildah from`` an image and mount its root filesystem; removed on exit."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.name = ""
        self.rootfs = Path()

    def __enter__(self) -> WorkingContainer:
        self.name = buildah_cmd("from", "--quiet", "--pull-never", "--name",
                                f"cre-test-{uuid.uuid4().hex[:8]}", self.ref).strip()
        self.rootfs = Path(buildah_cmd("mount", self.name).strip())
        return self

    def run(self, *argv: str, user: str = "65532:65532") -> subprocess.CompletedProcess[str]:
        """``buildah run`` (chroot isolation) as the given user with no capabilities."""
        return subprocess.run(["buildah", *STORAGE, "run", "--isolation", "chroot", "--user",
                               user, "--cap-drop", "ALL", self.name, "--", *argv],
                              capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.name:
            subprocess.run(["buildah", *STORAGE, "umount", self.name], capture_output=True,
                           check=False)
            subprocess.run(["buildah", *STORAGE, "rm", self.name], capture_output=True,
                           check=False)


def oci_config(*, rootfs: Path, image: Mapping[str, Any], args: Sequence[str] | None = None,
               env: Mapping[str, str] | None = None, field_refs: Mapping[str, str],
               binds: Sequence[tuple[Path, str]] = ()) -> dict[str, Any]:
    """The OCI runtime config a kubelet would produce for the Deployment's manager container.

    ``args`` replaces the container's args (as a pod's ``args`` replaces the image's Cmd);
    ``field_refs`` gives the downward-API values (``metadata.namespace`` ...); ``binds`` are
    read-only host files mounted into the container (e.g. a kubeconfig)."""
    pod, container = deployment()
    pod_sc: dict[str, Any] = pod.get("securityContext") or {}
    sc: dict[str, Any] = container.get("securityContext") or {}
    user, _, group = str(image.get("User") or "0:0").partition(":")
    uid = int(sc.get("runAsUser", pod_sc.get("runAsUser", user)))
    gid = int(sc.get("runAsGroup", pod_sc.get("runAsGroup", group or 0)))
    if (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")) and uid == 0:
        raise ImageError("runAsNonRoot is set but the container would run as uid 0")
    drop = set((sc.get("capabilities") or {}).get("drop") or [])
    caps = [] if "ALL" in drop else [c for c in DEFAULT_CAPS if c[4:] not in drop]
    command = container.get("command") or image.get("Entrypoint") or []
    argv = [*command, *(args if args is not None else container.get("args") or image.get("Cmd")
                        or [])]
    environ = dict(e.split("=", 1) for e in image.get("Env") or [])
    for var in container.get("env") or []:
        if "value" in var:
            environ[var["name"]] = str(var["value"])
        else:
            environ[var["name"]] = field_refs[var["valueFrom"]["fieldRef"]["fieldPath"]]
    environ.update(env or {})
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
    ]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for vm in container.get("volumeMounts") or []:
        volume = volumes[vm["name"]]
        if "emptyDir" not in volume:
            raise ImageError(f"volume {vm['name']}: only emptyDir volumes can be emulated")
        size = _bytes(str((volume["emptyDir"] or {}).get("sizeLimit", "64Mi")))
        mounts.append({"destination": vm["mountPath"], "type": "tmpfs", "source": "tmpfs",
                       "options": ["nosuid", "nodev", "mode=1777", f"size={size}"]})
    for host, dest in binds:
        mounts.append({"destination": dest, "type": "bind", "source": str(host),
                       "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]})
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid, "additionalGids": [gid]},
            "args": argv,
            "env": [f"{k}={v}" for k, v in environ.items()],
            "cwd": image.get("WorkingDir") or "/",
            "capabilities": {k: list(caps) for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": sc.get("allowPrivilegeEscalation") is False,
        },
        "root": {"path": str(rootfs), "readonly": bool(sc.get("readOnlyRootFilesystem"))},
        "hostname": field_refs.get("metadata.name", "cre-manager"),
        "mounts": mounts,
        "linux": {
            # No network namespace: the emulator listens on the host's loopback.
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
        },
    }


class PodContainer:
    """The manager container of the Deployment, run by runc on a working container's rootfs."""

    def __init__(self, ref: str, *, workdir: Path, args: Sequence[str] | None = None,
                 env: Mapping[str, str] | None = None, field_refs: Mapping[str, str],
                 files: Mapping[str, Path] | None = None) -> None:
        self.ref = ref
        self.workdir = workdir
        self.args = args
        self.env = env
        self.field_refs = field_refs
        self.files = dict(files or {})
        self.id = f"cre-image-{uuid.uuid4().hex[:10]}"
        self.log_path = workdir / f"{self.id}.log"
        self.working = WorkingContainer(ref)
        self.popen: subprocess.Popen[bytes] | None = None
        self.config: dict[str, Any] = {}
        self.started_at = 0.0  # time.monotonic() when runc was started

    def start(self) -> subprocess.Popen[bytes]:
        self.working.__enter__()
        bundle = Path(tempfile.mkdtemp(prefix="bundle-", dir=self.workdir))
        binds = []
        for dest, src in self.files.items():
            copy = bundle / Path(dest).name
            shutil.copyfile(src, copy)
            copy.chmod(0o644)  # the container's user is not the file's owner
            binds.append((copy, dest))
        self.config = oci_config(rootfs=self.working.rootfs, image=image_config(self.ref),
                                 args=self.args, env=self.env, field_refs=self.field_refs,
                                 binds=binds)
        (bundle / "config.json").write_text(json.dumps(self.config, indent=1))
        self.started_at = time.monotonic()
        with self.log_path.open("wb") as out:
            self.popen = subprocess.Popen(["runc", "run", "--bundle", str(bundle), self.id],
                                          stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
        return self.popen

    def manager(self, *, timeout: float = 60.0) -> ManagerProc:
        """Start the container; returns the manager once its servers listen (their addresses
        read from its ``serving`` log records)."""
        popen = self.start()
        proc = ManagerProc(name="container", popen=popen, log_path=self.log_path)

        def bound() -> bool:
            servers = {r.get("server"): r.get("address") for r in proc.json_records()
                       if r.get("msg") == "serving"}
            if "health" in servers and "metrics" in servers:
                proc.health_url = f"http://{servers['health']}"
                proc.metrics_url = f"http://{servers['metrics']}"
                return True
            return False

        wait_until(bound, timeout=timeout, what="the container to serve", interval=0.01,
                   alive=proc.check_alive)
        return proc

    def kill(self, signal_name: str = "TERM") -> None:
        """``runc kill``: the signal the kubelet sends through the runtime."""
        subprocess.run(["runc", "kill", self.id, signal_name], capture_output=True, check=False)

    def close(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.kill("KILL")
            self.popen.wait(30)
        subprocess.run(["runc", "delete", "--force", self.id], capture_output=True, check=False)
        self.working.__exit__(None, None, None)


def deployment_args(*, grace: str | None = None) -> list[str]:
    """The Deployment's args, with the servers on ephemeral loopback ports (the container shares
    the host's network here) and the kubeconfig the runner mounts at :data:`KUBECONFIG`."""
    _, container = deployment()
    replaced = ("--metrics-bind-address", "--health-probe-bind-address",
                *(("--shutdown-grace-period",) if grace else ()))
    args = [a for a in container.get("args") or [] if not a.startswith(replaced)]
    args += ["--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
             f"--kubeconfig={KUBECONFIG}"]
    if grace:
        args.append(f"--shutdown-grace-period={grace}")
    return args
