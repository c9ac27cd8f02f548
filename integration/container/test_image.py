"""The cre-manager image: what it contains, how it is labelled, and that it runs as deployed.

The Deployment runs the image with a read-only root, as uid 65532, with every capability dropped
and only /tmp writable; ``image.run.PodContainer`` starts it exactly so (runc on the image's
root filesystem, config from the Deployment), against the API emulator and the simulated
cluster, and the manager must become ready, reconcile a Job and exit 0 on SIGTERM.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import cre
from cre.kube.leader import LeaderRecord
from cre.testing.procs import Stack, wait_until
from image.build import LOCK, image_config
from image.run import KUBECONFIG, PodContainer, WorkingContainer, deployment, deployment_args

NODES = 4
GRACE_S = 20


def test_version_flag_prints_the_package_version(image_root: WorkingContainer) -> None:
    """``cre-manager --version`` in the image (buildah run, uid 65532, no capabilities)."""
    result = image_root.run("cre-manager", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"cre-manager {cre.__version__}"


def test_imports_load_bytecode_on_the_read_only_root(image_root: WorkingContainer) -> None:
    """Every module the manager imports comes from bytecode shipped in the image: a stale or
    missing .pyc would be recompiled (and not written) on every start."""
    result = image_root.run("python3", "-v", "-c", "import cre_manager.app")
    assert result.returncode == 0, result.stderr[-2000:]
    compiled = [ln for ln in result.stderr.splitlines()
                if "bytecode is stale" in ln or ln.startswith("# code object from /")]
    assert not compiled, compiled[:10]
    assert result.stderr.count(".pyc matches ") > 500


def test_config_labels_user_and_entrypoint(image_ref: str) -> None:
    config = image_config(image_ref)
    assert image_ref == f"cre-manager:{cre.__version__}"
    assert config["Entrypoint"] == ["cre-manager"]
    assert config["User"] == "65532:65532"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == cre.__version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    rev = labels["org.opencontainers.image.revision"]
    assert len(rev.removesuffix("+dirty")) == 40, rev
    assert labels["org.opencontainers.image.source"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["HOME"] == "/tmp"


def _site_packages(root: Path) -> Path:
    found = sorted((root / "opt" / "cre" / "lib").glob("python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def test_no_test_tools_compilers_shells_or_package_managers(image_root: WorkingContainer) -> None:
    root = image_root.rootfs
    site = _site_packages(root)
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert not installed & {"pytest", "hypothesis", "mypy", "ruff", "kopf", "kubernetes",
                            "pip", "setuptools", "wheel"}, installed
    for path in ("bin/sh", "bin/bash", "bin/dash", "usr/bin/apt", "usr/bin/apt-get",
                 "usr/bin/dpkg", "bin/tar", "usr/bin/perl", "usr/bin/gcc", "usr/bin/cc",
                 "usr/bin/ld", "usr/bin/as", "usr/bin/make", "sbin/start-stop-daemon"):
        assert not (root / path).exists() and not (root / path).is_symlink(), path
    binaries = sorted(p.name for d in ("bin", "sbin", "usr/bin", "usr/sbin")
                      for p in (root / d).iterdir() if (root / d).is_dir())
    assert binaries == ["python3", "python3.11"], binaries
    caches = [p for p in (root / "root" / ".cache", root / "tmp" / "pip",
                          root / "var" / "cache" / "apt" / "archives") if p.exists()]
    assert not caches
    assert not list((root / "tmp").iterdir())
    assert not list(root.glob("var/cache/**/*.deb")) and not list(root.glob("**/*.whl"))


def test_every_installed_distribution_is_pinned_in_the_lock(image_root: WorkingContainer) -> None:
    """The virtualenv holds exactly CRE and the lock file's pins, at the pinned versions."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, rest = line.partition("==")
            pins[name.lower().replace("_", "-").replace(".", "-")] = rest.split()[0].rstrip(";")
    site = _site_packages(image_root.rootfs)
    found = {}
    for info in site.glob("*.dist-info"):
        meta = (info / "METADATA").read_text(encoding="utf-8").split("\n\n")[0]
        fields = dict(ln.split(": ", 1) for ln in meta.splitlines() if ": " in ln)
        found[fields["Name"].lower().replace("_", "-").replace(".", "-")] = fields["Version"]
    assert found.pop("cre") == cre.__version__
    windows_only = {n for n in pins if n in ("colorama",)}
    assert found == {n: v for n, v in pins.items() if n not in windows_only}


def test_nothing_is_writable_but_tmp(image_root: WorkingContainer) -> None:
    """Everything belongs to root and is not world-writable, except /tmp (sticky, 1777);
    nothing belongs to the runtime user 65532."""
    root = image_root.rootfs
    bad = []
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        rel = "/" + str(path.relative_to(root)) if path != root else "/"
        if rel == "/tmp":
            assert stat.S_IMODE(st.st_mode) == 0o1777
            continue
        if st.st_uid != 0 or st.st_gid != 0 or st.st_mode & stat.S_IWOTH:
            bad.append(f"{rel} {st.st_uid}:{st.st_gid} {stat.filemode(st.st_mode)}")
    assert not bad, bad[:20]


def _create_namespace(stack: Stack, name: str) -> None:
    stack.kubectl("apply", "-f", "-",
                  stdin=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n")


def _gpu_nodes(stack: Stack) -> list[str]:
    items = stack.kubectl_json("get", "nodes", "-l", "nvidia.com/gpu.present=true")["items"]
    return sorted(n["metadata"]["name"] for n in items)


def _job_phase(stack: Stack, name: str) -> str:
    job = stack.kubectl_json("get", "jobs.cre.dev", name)
    return str((job.get("status") or {}).get("phase") or "")


def test_runs_as_deployed_ready_reconciles_and_stops_on_sigterm(image_ref: str) -> None:
    _, container = deployment()
    assert container["image"] == f"cre-manager:{cre.__version__}"
    with Stack() as stack:
        stack.start_emulator()
        sim = stack.start_cluster(nodes=NODES, time_scale=10.0)
        wait_until(lambda: len(_gpu_nodes(stack)) >= NODES, timeout=60, what="GPU nodes",
                   interval=0.2, alive=sim.check_alive)
        _create_namespace(stack, "cre-system")
        pod = PodContainer(image_ref, workdir=stack.workdir,
                           args=deployment_args(grace=f"{GRACE_S}s"),
                           field_refs={"metadata.namespace": "cre-system",
                                       "metadata.name": "cre-manager-7d9f-abcde"},
                           files={KUBECONFIG: stack.kubeconfig})
        try:
            proc = pod.manager()
            config = pod.config
            assert config["root"]["readonly"] is True
            assert config["process"]["user"]["uid"] == 65532
            assert config["process"]["capabilities"]["effective"] == []
            assert config["process"]["noNewPrivileges"] is True
            wait_until(proc.ready, timeout=60, what="the container to be ready",
                       alive=proc.check_alive)
            status, body = proc.get("health", "/readyz?verbose")
            assert status == 200 and "[+]leader-election ok" in body, body
            # The identity comes from the downward API (CRE_LEADER_ELECT_IDENTITY).
            lease = stack.kubectl_json("get", "lease", "-n", "cre-system",
                                       "cre-manager.cre.dev")
            assert LeaderRecord.from_lease(lease).holder_identity == "cre-manager-7d9f-abcde"

            rendered = subprocess.run(
                [sys.executable, "-m", "cre.render", "--entry", "communication/nccl-all-reduce",
                 "--platform", "aws", "--arch", "h100", "--nodes", ",".join(_gpu_nodes(stack)),
                 "--job-name", "image-ok"], capture_output=True, text=True, check=True)
            stack.kubectl("apply", "-f", "-", stdin=rendered.stdout)
            wait_until(lambda: _job_phase(stack, "image-ok") == "Succeeded", timeout=180,
                       what="Job image-ok to succeed", interval=0.5, alive=proc.check_alive)

            pod.kill("TERM")
            assert proc.wait(GRACE_S + 30) == 0, proc.tail()
            records = proc.json_records()
            assert records[-1]["msg"] == "cre-manager exiting", records[-3:]
            assert records[-1]["exitCode"] == 0
            assert not [r for r in records if r.get("level") == "error"]
            lease = stack.kubectl_json("get", "lease", "-n", "cre-system",
                                       "cre-manager.cre.dev")
            assert LeaderRecord.from_lease(lease).holder_identity == ""
        finally:
            pod.close()
            if pod.log_path.is_file():
                print(json.dumps(pod.config.get("process", {}).get("args")))
                print(pod.log_path.read_text()[-3000:])
