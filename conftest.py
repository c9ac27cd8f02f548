"""Test tiers: every collected test gets exactly one of four markers, by where it lives.

``unit``       pure layers and in-process units: no emulator or simulator, no server, no
               connection, no child process (checked while each unit test runs: a unit test
               that listens, connects or starts a process fails and names what it did).
``emulator``   the API emulator or the cluster simulator, in process or on loopback (also
               driven through kubectl and the official clients), and other loopback servers:
               the manager's probes, a fake kubelet.
``realplane``  the real kube-apiserver + etcd (+ KWOK, JobSet, Trainer) built from Go modules.
``e2e``        our programs as child processes (``cre-manager``, ``cre``, the emulator and
               simulator CLIs, the image, rendered scripts in bash, a fresh interpreter) and
               repository tools run as processes (pytest, mypy, lint-imports, chromium).

The tier comes from the first match of: a tier marker written on the test (wins; more than one
is an error), the real control plane (the ``real_control_plane`` fixture, the ``[real]``
instance of a ``both_backends`` test, or every backend-switchable test under
``CRE_BACKEND=real``), a golden case's ``type`` (``render`` / ``run-render`` cases are pure,
the others run controllers against the emulator), then the longest path prefix in
:data:`TIERS`. A test that matches nothing is a collection error, never a silent default.

``make test`` runs the whole suite under pytest-xdist with ``--dist loadgroup``; the tests that
must not run beside one another share an ``xdist_group`` (:data:`GROUPS`), so one worker runs
them one at a time while the other worker takes the rest.
"""

from __future__ import annotations

import enum
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No hypothesis test has a wall-clock deadline: these machines are shared and noisy, and a
# deadline turns a slow example into a failure that says nothing about the code under test.
settings.register_profile("cre", deadline=None)
settings.load_profile("cre")

ROOT = Path(__file__).resolve().parent


class Tier(enum.Enum):
    UNIT = "unit"
    EMULATOR = "emulator"
    REALPLANE = "realplane"
    E2E = "e2e"


U, EMU, REAL, E2E = Tier.UNIT, Tier.EMULATOR, Tier.REALPLANE, Tier.E2E

#: Path prefix (relative to the repository, ``/``-separated) -> (tier, why). The longest
#: matching prefix wins, so a folder's default is refined by its files.
TIERS: dict[str, tuple[Tier, str]] = {
    # Pure layers.
    "tests/api/": (U, "attrs models, converter, validation, CRD generation"),
    "tests/catalog/": (U, "catalog loader and templates"),
    "tests/core/": (U, "pure reconciliation core"),
    "tests/render/": (U, "pure rendering"),
    "tests/render/test_render_shell_safety.py": (E2E, "execs argv through a fresh interpreter "
                                                      "and checks scripts with bash -n"),
    "tests/render/test_workloadrun_shell.py": (E2E, "runs the wrapped scripts in bash"),
    "tests/container/": (U, "the image's inputs, read from the repository"),
    "tests/golden/": (U, "golden harness, normaliser, JSONPath, plugin (pytester, in process)"),
    "tests/golden/test_controller_runner.py": (EMU, "controller cases against the emulator"),
    # The informer layer: fakes are unit, the emulator over HTTP is not.
    "tests/kube/": (EMU, "informers, client and events against the emulator"),
    "tests/kube/test_controller_runtime.py": (U, "generic controller loop over fakes"),
    "tests/kube/test_kube_reflector.py": (U, "reflector over a fake client and clock"),
    "tests/kube/test_kube_store_projections.py": (U, "slim projections"),
    "tests/kube/test_kube_workqueue.py": (U, "workqueue over a fake clock"),
    "tests/kube/test_metrics_series.py": (U, "metric series"),
    "tests/kube/test_node_projection_taints.py": (U, "node projection"),
    "tests/kube/test_pod_read_policy.py": (U, "source scan of the pod-read policy"),
    "tests/kube/test_metrics_registry.py": (E2E, "imports the manager in a fresh interpreter"),
    # The simulator: its step functions are unit; a running simulator is not.
    "tests/cluster/": (EMU, "the simulator running (in memory or against the emulator)"),
    "tests/cluster/test_cli_options.py": (U, "argument parsing"),
    "tests/cluster/test_scenario_cli.py": (U, "argument parsing"),
    "tests/cluster/test_soak_checks.py": (U, "soak bookkeeping over recorded results"),
    "tests/cluster/test_steps.py": (U, "one controller step over a World value"),
    "tests/cluster/test_stubs_profiles_clock.py": (U, "stubs, profiles, the simulated clock"),
    "tests/cluster/test_trainer_stub.py": (U, "the scripted trainer's choices"),
    "tests/cluster/test_cli_process.py": (E2E, "the simulator CLI as a process"),
    # The manager: configuration is unit; its servers and processes are not.
    "tests/manager/": (EMU, "the manager's runnables, probes and leader election on loopback"),
    "tests/manager/test_manager_config.py": (U, "flags and environment"),
    "tests/manager/test_manager_controllers.py": (U, "controller wiring, nothing started"),
    "tests/manager/test_manager_gc.py": (U, "garbage-collector settings"),
    "tests/manager/test_manager_logs.py": (U, "log formatting"),
    "tests/manager/test_manager_deploy.py": (E2E, "kubectl kustomize and the manager process"),
    "tests/manager/test_monitoring_assets.py": (E2E, "promtool as a child process"),
    "tests/manager/test_manager_startup.py": (E2E, "cre-manager processes"),
    "tests/manager/test_manager_startup_retry.py": (E2E, "cre-manager processes"),
    # The `cre` command: in-process commands are unit; a served cluster or a process is not.
    "tests/cli/": (EMU, "commands against a served fixture cluster"),
    "tests/cli/test_catalog.py": (U, "in-process command, no cluster"),
    "tests/cli/test_pieces.py": (U, "formatting pieces"),
    "tests/cli/test_render.py": (U, "in-process command, no cluster"),
    "tests/cli/test_validate.py": (E2E, "offline schemas, and `cre validate -` as a process"),
    "tests/cli/test_bad_input.py": (E2E, "the command as a process (exit codes, stderr)"),
    "tests/cli/test_cluster_errors.py": (E2E, "cre cluster as a process"),
    "tests/cli/test_cluster_up.py": (E2E, "cre cluster up starts emulator and simulator processes"),
    "tests/cli/test_scripts.py": (E2E, "the shipped scripts in bash and fresh interpreters"),
    "tests/cli/test_help.py": (E2E, "the command, kubectl plugin and completion as processes"),
    "tests/cli/test_report_browser.py": (E2E, "chromium through Playwright"),
    # Emulator conformance and the controllers over HTTP.
    "tests/apiserver/": (EMU, "emulator conformance (also through kubectl and the clients)"),
    "tests/apiserver/test_cli.py": (E2E, "the emulator CLI as a process"),
    "tests/controller/": (EMU, "controllers against the emulator"),
    # The real control plane; its pure helpers are unit.
    "tests/controlplane/": (REAL, "kube-apiserver, etcd, KWOK, JobSet and their Go builds"),
    "tests/controlplane/test_allreal_units.py": (U, "all-real oracle helpers"),
    "tests/controlplane/test_kwok_stages.py": (U, "KWOK stage documents"),
    "tests/controlplane/test_wire.py": (U, "wire-byte masking and comparison"),
    "tests/controlplane/test_kubelet_logs.py": (EMU, "the fake kubelet's log server"),
    "tests/controlplane/test_normalise.py": (EMU, "differential normaliser over two emulators"),
    # Whole-repository checks; a new file here is e2e until given its own entry.
    "tests/": (E2E, "whole-repository checks (a new file: give it its own entry)"),
    "tests/test_design_records.py": (U, "design records' headers, read as text"),
    "tests/test_docs_roles.py": (E2E, "the docs' role extension through griffe (runs git)"),
    "tests/test_examples.py": (E2E, "the examples' golden suites in their own pytest"),
    "tests/test_layers.py": (E2E, "lint-imports as a process"),
    "tests/test_kind_contract.py": (E2E, "lint-imports as a process on a copy of the tree"),
    "tests/test_packaging.py": (E2E, "mypy and fresh interpreters"),
    "tests/test_readme.py": (E2E, "the README's scripts as processes"),
    "tests/test_tiers.py": (E2E, "collects the whole suite in a pytest process"),
    # Integration.
    "integration/cases/": (EMU, "golden cases (the type decides; see GOLDEN_UNIT_TYPES)"),
    "integration/e2e/": (E2E, "emulator, simulator and cre-manager processes"),
    "integration/container/": (E2E, "buildah, runc and the built image"),
    "integration/": (E2E, "integration (a new folder: give it its own entry)"),
}

#: Golden case types that run no controller, server or process: pure rendering.
GOLDEN_UNIT_TYPES: frozenset[str] = frozenset({"render", "run-render"})

#: Folders whose tests switch to the real control plane under ``CRE_BACKEND=real``.
BACKEND_SWITCHED: tuple[str, ...] = ("tests/apiserver/", "integration/e2e/")

#: xdist groups: the tests of one group run on one worker, one at a time.
GROUPS: dict[str, tuple[str, str]] = {
    # One session-scoped control plane per worker, heavy Go processes, ports and data dirs.
    "realplane": ("realplane", "one real control plane at a time (session fixture, etcd and "
                               "kube-apiserver processes, the Go build cache)"),
    # Each starts emulator + simulator (+ manager) processes on a scaled clock; two at once on
    # two cores would starve each other's clocks (leader leases of 3 s, the seeded soak).
    "integration/e2e/": ("stack", "one emulator + simulator + manager stack at a time"),
    # The image is built once per worker by a session fixture (buildah on the vfs driver).
    "integration/container/": ("image", "one image build and container at a time"),
}


def tier_for(path: str, *, marked: tuple[str, ...] = (), real_plane: bool = False,
             case_type: str | None = None) -> Tier:
    """The tier of one test at ``path`` (repository-relative); see the module docstring."""
    if len(marked) > 1:
        raise ValueError(f"{path}: more than one tier marker ({', '.join(marked)}); "
                         f"a test belongs to exactly one tier")
    if marked:
        return Tier(marked[0])
    if real_plane:
        return REAL
    if case_type is not None:
        return U if case_type in GOLDEN_UNIT_TYPES else EMU
    best = max((p for p in TIERS if path.startswith(p) or path == p.rstrip("/")),
               key=len, default=None)
    if best is None:
        raise ValueError(f"{path}: no test tier for this path; add it to TIERS in "
                         f"{ROOT / 'conftest.py'} (unit, emulator, realplane or e2e)")
    return TIERS[best][0]


def group_for(path: str, tier: Tier) -> str | None:
    """The xdist group of a test, or None when it may run beside anything."""
    if tier is REAL:
        return GROUPS["realplane"][0]
    for prefix, (group, _why) in GROUPS.items():
        if path.startswith(prefix):
            return group
    return None


def _relative(item: pytest.Item) -> str:
    path = Path(str(item.path))
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _case_type(item: pytest.Item) -> str | None:
    """A golden case's ``type`` (None for other items; ``?`` for an unreadable case, which
    its own run reports)."""
    from cre.testing.golden.plugin import GoldenCase, StaleGolden

    if isinstance(item, StaleGolden):
        return "render"  # compares file names only
    if not isinstance(item, GoldenCase):
        return None
    from cre.testing.golden.harness import CaseError, load_input

    try:
        return str(load_input(item.path)["type"])
    except (CaseError, OSError, ValueError):
        return "?"


def _real_plane(item: pytest.Item, path: str) -> bool:
    if "real_control_plane" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("e2e_backend") == "real":
        return True
    real_env = os.environ.get("CRE_BACKEND", "emulator") == "real"
    return real_env and path.startswith(BACKEND_SWITCHED)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every item its tier marker and, where it has one, its xdist group."""
    names = {t.value for t in Tier}
    problems: list[str] = []
    for item in items:
        path = _relative(item)
        marked = tuple(dict.fromkeys(m.name for m in item.iter_markers() if m.name in names))
        try:
            tier = tier_for(path, marked=marked, real_plane=_real_plane(item, path),
                            case_type=_case_type(item))
        except ValueError as exc:
            problems.append(f"{item.nodeid}: {exc}")
            continue
        if not marked:
            item.add_marker(tier.value)
        group = group_for(path, tier)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    if problems:
        raise pytest.UsageError("test tiers:\n  " + "\n  ".join(problems))


class TierViolation(AssertionError):
    """A unit test listened, connected or started a process."""


@contextmanager
def no_servers_or_processes(what: str) -> Iterator[list[str]]:
    """While open, listening, connecting and starting a child process from this thread raise
    :class:`TierViolation` naming ``what`` (and are recorded in the yielded list, so a caller
    that swallowed the error is still caught). Other threads (one left behind by an earlier
    test of the same worker) go through untouched."""
    seen: list[str] = []
    owner_thread = threading.get_ident()
    listen_, connect_ = socket.socket.listen, socket.socket.connect
    popen_ = subprocess.Popen.__init__

    def refuse(action: str) -> TierViolation:
        seen.append(action)
        return TierViolation(
            f"{what} is a unit test but {action}; a unit test starts no server, connection or "
            f"process: give its file the right tier in TIERS ({ROOT / 'conftest.py'})")

    def listen(self: socket.socket, *args: Any) -> None:
        if threading.get_ident() != owner_thread:
            return listen_(self, *args)
        raise refuse(f"listened on a socket ({self.getsockname()!r})")

    def connect(self: socket.socket, address: Any) -> None:
        if threading.get_ident() != owner_thread:
            return connect_(self, address)
        raise refuse(f"connected to {address!r}")

    def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if threading.get_ident() != owner_thread:
            return popen_(self, args, *rest, **kwargs)
        shown = args if isinstance(args, str) else " ".join(map(str, args))
        raise refuse(f"started a process ({shown[:120]})")

    patches: list[tuple[type[Any], str, Any]] = [
        (socket.socket, "listen", listen), (socket.socket, "connect", connect),
        (subprocess.Popen, "__init__", popen)]
    # socket.socket inherits listen and connect from _socket.socket: restore by deleting.
    saved = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield seen
    finally:
        for owner, name, original in saved:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


@contextmanager
def _unit_guard(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker(Tier.UNIT.value) is None:
        yield
        return
    with no_servers_or_processes(item.nodeid) as seen:
        yield
    if seen:
        raise TierViolation(f"{item.nodeid} is a unit test but {seen[0]} (the error was "
                            f"caught inside the test); give its file the right tier in TIERS")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _unit_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _unit_guard(item):
        return (yield)
