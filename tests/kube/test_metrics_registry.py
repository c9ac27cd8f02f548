"""Importing the library registers nothing on prometheus-client's default registry."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import cre.kube, cre.kube.runtime
    import cre.controller, cre.controller.job.controller, cre_manager.app
    from prometheus_client import REGISTRY, CollectorRegistry, Gauge
    from cre.controller.job.controller import JobController

    # A library user's own collector with a controller-runtime name: no clash on import.
    mine = Gauge("workqueue_depth", "the user's own queue", ["name"])
    mine.labels(name="theirs").set(7)

    class NoClient:
        pass

    # CRE's collectors go where the caller says.
    registry = CollectorRegistry()
    JobController(NoClient(), namespaces=["a"], registry=registry)  # type: ignore[arg-type]
    assert registry.get_sample_value("workqueue_adds_total", {"name": "job"}) == 0.0
    assert registry.get_sample_value("controller_runtime_reconcile_total",
                                     {"controller": "job", "result": "success"}) == 0.0
    events = {"component": "cre.dev/job-controller", "result": "recorded"}
    assert registry.get_sample_value("cre_events_total", events) == 0.0
    assert REGISTRY.get_sample_value("cre_events_total", events) is None
    assert REGISTRY.get_sample_value("workqueue_depth", {"name": "theirs"}) == 7.0
    assert REGISTRY.get_sample_value("controller_runtime_reconcile_total",
                                     {"controller": "job", "result": "success"}) is None
    print("ok")
""")


def test_import_registers_nothing_on_the_default_registry() -> None:
    """After ``import cre.kube, cre.controller`` a user can define ``workqueue_depth`` on the
    default registry, and a JobController given a registry reports only there."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_collectors_are_built_once_per_registry() -> None:
    """``PerRegistry(build)`` builds a registry's collectors the first time it is asked and
    hands the same ones after; another registry gets its own."""
    from prometheus_client import CollectorRegistry

    from cre.kube.metrics import PerRegistry

    built: list[CollectorRegistry] = []
    per = PerRegistry(lambda reg: built.append(reg) or len(built))
    one, two = CollectorRegistry(), CollectorRegistry()
    assert (per(one), per(one), per(two), per(one)) == (1, 1, 2, 1)
    assert built == [one, two]
