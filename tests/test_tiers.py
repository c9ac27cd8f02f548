"""Every collected test has exactly one tier marker (the root conftest.py), and a unit test that
starts a server, a connection or a process fails and says so."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("unit", "emulator", "realplane", "e2e")

# Loaded by pytest at collection as the root conftest; the tests read it as a module of its own.
_spec = importlib.util.spec_from_file_location("cre_root_conftest", ROOT / "conftest.py")
assert _spec is not None and _spec.loader is not None
tiers: ModuleType = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiers)

# A pytest plugin for the collection below: writes {nodeid: [tier markers], "groups": ...}.
DUMP = """
import json, os
TIERS = {"unit", "emulator", "realplane", "e2e"}

def pytest_collection_finish(session):
    out = {}
    for item in session.items:
        group = item.get_closest_marker("xdist_group")
        out[item.nodeid] = {"tiers": [m.name for m in item.iter_markers() if m.name in TIERS],
                            "group": group.args[0] if group else None}
    with open(os.environ["TIER_DUMP"], "w") as f:
        json.dump(out, f)
"""


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """The whole suite as ``pytest --collect-only`` sees it, with each item's markers."""
    folder = tmp_path_factory.mktemp("tiers")
    (folder / "tierdump.py").write_text(DUMP)
    out = folder / "items.json"
    env = {**os.environ, "TIER_DUMP": str(out),
           "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT),
                                          os.environ.get("PYTHONPATH", "")])}
    env.pop("CRE_BACKEND", None)
    # A module that fails to import is its own test's failure, not the tiers': carry on.
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-p", "tierdump",
                           "--continue-on-collection-errors"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert "test tiers:" not in done.stdout + done.stderr, done.stdout[-3000:]
    items: dict[str, dict[str, object]] = json.loads(out.read_text())
    return items


def test_every_collected_test_has_exactly_one_tier(collected: dict[str, dict[str, object]]
                                                   ) -> None:
    """Each item of the whole suite carries one tier marker, and every tier is used."""
    wrong = {n: v["tiers"] for n, v in collected.items() if len(v["tiers"]) != 1}  # type: ignore[arg-type]
    assert not wrong, wrong
    counts = Counter(v["tiers"][0] for v in collected.values())  # type: ignore[index]
    assert set(counts) == set(TIERS), counts
    assert len(collected) > 2000


def test_known_tests_land_in_their_tier(collected: dict[str, dict[str, object]]) -> None:
    """Anchors: core is unit, a render golden is unit, a scenario golden is emulator, the
    differential is realplane, a both_backends test is e2e on the emulator and realplane on the
    real server, and the real-plane and stack tests carry their xdist group."""
    def tier_of(prefix: str) -> set[str]:
        found = {v["tiers"][0] for n, v in collected.items() if n.startswith(prefix)}  # type: ignore[index]
        assert found, f"nothing collected under {prefix}"
        return found

    assert tier_of("tests/core/") == {"unit"}
    assert tier_of("integration/cases/render::") == {"unit"}
    assert tier_of("integration/cases/run-render::") == {"unit"}
    assert tier_of("integration/cases/scenario::") == {"emulator"}
    assert tier_of("integration/cases/job::") == {"emulator"}
    assert tier_of("tests/controlplane/test_differential.py") == {"realplane"}
    assert tier_of("integration/e2e/test_e2e_certify.py::") == {"e2e", "realplane"}
    reals = [n for n in collected if n.startswith("integration/e2e/") and n.endswith("[real]")]
    assert reals and all(collected[n]["tiers"] == ["realplane"] for n in reals)
    for node, value in collected.items():
        if value["tiers"] == ["realplane"]:
            assert value["group"] == "realplane", node
        elif node.startswith("integration/e2e/"):
            assert value["group"] == "stack", node


@pytest.mark.unit
def test_path_table_longest_prefix_wins() -> None:
    """A file's entry refines its folder's, a golden's type decides over its folder, the real
    plane and a hand-written marker decide over both, and an unknown path is an error."""
    assert tiers.tier_for("tests/kube/test_kube_events.py").value == "emulator"
    assert tiers.tier_for("tests/kube/test_kube_workqueue.py").value == "unit"
    assert tiers.tier_for("integration/cases/x/y", case_type="render").value == "unit"
    assert tiers.tier_for("integration/cases/x/y", case_type="scenario").value == "emulator"
    assert tiers.tier_for("tests/core/test_x.py", real_plane=True).value == "realplane"
    assert tiers.tier_for("tests/core/test_x.py", marked=("e2e",)).value == "e2e"
    with pytest.raises(ValueError, match="more than one tier marker"):
        tiers.tier_for("tests/core/test_x.py", marked=("unit", "e2e"))
    with pytest.raises(ValueError, match="no test tier for this path"):
        tiers.tier_for("elsewhere/test_x.py")


@pytest.mark.unit
def test_groups_follow_the_tier_and_the_path() -> None:
    """Real-plane tests share one group wherever they live; e2e stacks and image tests have
    theirs; the rest run anywhere."""
    assert tiers.group_for("integration/e2e/test_e2e_manager.py", tiers.Tier.REALPLANE) \
        == "realplane"
    assert tiers.group_for("integration/e2e/test_e2e_manager.py", tiers.Tier.E2E) == "stack"
    assert tiers.group_for("integration/container/test_image.py", tiers.Tier.E2E) == "image"
    assert tiers.group_for("tests/apiserver/test_crud.py", tiers.Tier.EMULATOR) is None


def test_unit_guard_refuses_processes_and_servers() -> None:
    """Inside the guard, starting a process, listening and connecting from the test's thread
    raise a TierViolation naming the test; other threads and the code after it work."""
    with tiers.no_servers_or_processes("tests/x.py::t") as seen:
        with pytest.raises(tiers.TierViolation, match=r"tests/x\.py::t is a unit test but "
                                                      r"started a process \(true\)"):
            subprocess.run(["true"], check=False)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            with pytest.raises(tiers.TierViolation, match="listened on a socket"):
                sock.listen()
            with pytest.raises(tiers.TierViolation, match="connected to"):
                sock.connect(("127.0.0.1", 9))
        # Another thread (one an earlier test left running) is not this test's doing.
        done: list[int] = []
        other = threading.Thread(
            target=lambda: done.append(subprocess.run(["true"], check=False).returncode))
        other.start()
        other.join(30)
        assert done == [0]
    assert len(seen) == 3
    assert subprocess.run(["true"], check=False).returncode == 0
