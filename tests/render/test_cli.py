"""``python -m cre.render`` prints the Job and its dependencies as YAML documents."""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from cre.render.__main__ import main


def test_cli_prints_job_then_dependencies(capsys: pytest.CaptureFixture[str]) -> None:
    """The first document is the Job, then the runtime and the ComputeDomain."""
    code = main(
        [
            "--entry",
            "communication/nccl-all-reduce",
            "--platform",
            "aws",
            "--arch",
            "gb200",
            "--nodes",
            "n1,n2",
            "--job-name",
            "demo",
            "--kai",
        ]
    )
    assert code == 0
    docs = list(YAML(typ="safe", pure=True).load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["Job", "TrainingRuntime", "ComputeDomain"]
    assert docs[0]["spec"]["workloadMetadata"]["labels"] == {"kai.scheduler/queue": "default-queue"}


def test_cli_reports_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown entry exits 2 with the catalog's message on stderr."""
    code = main(
        [
            "--entry",
            "x/y",
            "--platform",
            "aws",
            "--arch",
            "h100",
            "--nodes",
            "n1",
            "--job-name",
            "demo",
        ]
    )
    assert code == 2
    assert "unknown entry" in capsys.readouterr().err
