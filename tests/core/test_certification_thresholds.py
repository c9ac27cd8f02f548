"""A Certification's ``thresholds`` and ``measurementTimeout`` (global or per category) reach
every group Job its Workflows render, and the Job they give is valid."""

from __future__ import annotations

from typing import Any

from cre.api.converter import from_dict
from cre.api.job import Job
from cre.api.validate import validate
from cre.core.workflow.groupjob import group_job
from tests.core.tierworld import nodes, workflow

THRESHOLDS = {"busBandwidthGBps": "value >= 1", "algBandwidthGBps": "value > 0.5"}


def _job(**options: Any) -> dict[str, Any]:
    wf = workflow(nodes(2), **options)
    return group_job(wf, name="cert-job-0", group="group-0",
                     nodes=["node-0", "node-1"], renames={})


def test_global_options_reach_the_rendered_job() -> None:
    body = _job(thresholds=THRESHOLDS, measurementTimeout="2m")
    spec = body["spec"]
    assert spec["thresholds"] == THRESHOLDS
    assert spec["measurementTimeout"] == "2m"
    assert spec["bandwidthMeasurement"]["logProfileRef"] == "nccl-bandwidth"
    job = from_dict(body)
    assert isinstance(job, Job)
    assert not validate(job), validate(job)


def test_category_options_win_over_global_ones() -> None:
    body = _job(thresholds={"busBandwidthGBps": "value >= 1000000"}, measurementTimeout="1m",
                categories=[{"domain": "communication", "variant": "nccl-all-reduce",
                             "options": {"thresholds": {"busBandwidthGBps": "value >= 7"},
                                         "measurementTimeout": "3m"}}])
    assert body["spec"]["thresholds"] == {"busBandwidthGBps": "value >= 7"}
    assert body["spec"]["measurementTimeout"] == "3m"


def test_without_options_the_job_has_no_thresholds() -> None:
    spec = _job()["spec"]
    assert "thresholds" not in spec and spec["measurementTimeout"] == "5m"  # the API default
