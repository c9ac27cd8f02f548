"""A Certification with ``testScale: diagnose`` builds a Workflow that diagnoses (screening
groups of ceil(sqrt(N)), bisection over NVLink domains, the reference's short-run defaults)."""

from __future__ import annotations

from typing import Any

import attrs

from cre.api.certification import CategoryOptions, Certification
from cre.api.common import TestScale
from cre.core.certification.build import build_workflow, discover_for, precheck
from cre.core.workflow.discovery import DiscoveryFailure
from tests.core.tierworld import catalog, certification, nodes

ALL_REDUCE = ("communication", "nccl-all-reduce")


def _built(count: int, **options: Any) -> dict[str, Any]:
    cert = certification(ALL_REDUCE, **options)
    found = discover_for(cert, 0, nodes(count), catalog())
    assert not isinstance(found, DiscoveryFailure)
    return build_workflow(cert, 0, found=found, catalog=catalog())


def _args(wf: dict[str, Any]) -> str:
    return str(wf["spec"]["jobTemplate"]["spec"]["workload"])


def test_diagnose_is_accepted_and_wired() -> None:
    """testScale diagnose passes the precheck and sets orchestration.diagnose (floor 2, the
    NVLink clique as the domain), one iteration and the 15m timeout."""
    cert = certification(ALL_REDUCE, testScale="diagnose")
    assert precheck(cert, catalog()) == ()
    orch = _built(16, testScale="diagnose")["spec"]["orchestration"]
    assert orch["diagnose"] == {"minGroupSize": 2, "topologyKey": "nvidia.com/gpu.clique"}
    assert orch["iterations"] == 1
    assert orch["execution"]["timeoutPerJob"] == "15m"


def test_diagnose_refuses_repeat_count() -> None:
    """Diagnose runs its rounds once: a repeatCount above 1 is refused before anything is
    created, naming the field."""
    cert = certification(ALL_REDUCE, testScale="diagnose", repeatCount=2)
    assert precheck(cert, catalog()) == (
        "spec.categories[0].options.repeatCount: testScale diagnose runs its rounds once; "
        "repeatCount must be 1",)


def _own(cert: Certification, index: int, **options: Any) -> Certification:
    """``cert`` with category ``index``'s own options set to ``options``."""
    categories = list(cert.spec.categories)
    categories[index] = attrs.evolve(categories[index], options=CategoryOptions(**options))
    return attrs.evolve(cert, spec=attrs.evolve(cert.spec, categories=tuple(categories)))


def test_diagnose_knobs_reach_the_workflow() -> None:
    """minGroupSize and topologyKey become the Workflow's orchestration.diagnose; topologyKey
    also names intra-rack's domains; a category's own minGroupSize under a global diagnose
    passes the precheck."""
    orch = _built(16, testScale="diagnose", minGroupSize=4,
                  topologyKey="example.com/rack")["spec"]["orchestration"]
    assert orch["diagnose"] == {"minGroupSize": 4, "topologyKey": "example.com/rack"}
    rack = _built(16, testScale="intra-rack", topologyKey="example.com/rack")
    assert rack["spec"]["orchestration"]["topology"] == {"topologyKey": "example.com/rack",
                                                         "strictDomain": True}
    cert = _own(certification(ALL_REDUCE, testScale="diagnose"), 0, min_group_size=3)
    assert precheck(cert, catalog()) == ()


def test_diagnose_knobs_elsewhere_are_refused_naming_the_field() -> None:
    """minGroupSize outside testScale diagnose, or topologyKey outside intra-rack and
    diagnose, would be silently ignored: the precheck refuses it, naming the field path."""
    assert precheck(certification(ALL_REDUCE, minGroupSize=3), catalog()) == (
        "spec.minGroupSize: applies only with testScale diagnose, and no category runs at "
        "that scale",)
    assert precheck(certification(ALL_REDUCE, testScale="intra-node",
                                  topologyKey="example.com/rack"), catalog()) == (
        "spec.topologyKey: applies only with testScale intra-rack or diagnose, and no "
        "category runs at that scale",)
    # A global knob one category uses is fine; a category's own knob it cannot use is not.
    cert = _own(certification(ALL_REDUCE, ALL_REDUCE, testScale="diagnose", minGroupSize=3),
                1, test_scale=TestScale.FULL_SCALE, min_group_size=3)
    assert precheck(cert, catalog()) == (
        "spec.categories[1].options.minGroupSize: applies only with testScale diagnose; the "
        "category's testScale is full-scale",)


def test_diagnose_screens_in_sqrt_groups() -> None:
    """Unset nodesPerJob screens in groups of ceil(sqrt(N)) (at least 2); a set one wins."""
    def per_job(wf: dict[str, Any]) -> int:
        return int(wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
                   ["numNodes"])

    assert per_job(_built(16, testScale="diagnose")) == 4
    assert per_job(_built(10, testScale="diagnose")) == 4
    assert per_job(_built(3, testScale="diagnose")) == 2
    assert per_job(_built(16, testScale="diagnose", nodesPerJob=8)) == 8
    assert per_job(_built(16)) == 16


def test_diagnose_runs_short_nccl_runs_unless_set() -> None:
    """Under diagnose nccl-tests run -n 5 -N 1 unless the options say otherwise."""
    short = _args(_built(4, testScale="diagnose"))
    assert "'-n', '5'" in short and "'-N', '1'" in short
    own = _args(_built(4, testScale="diagnose", numIterations=7))
    assert "'-n', '7'" in own
