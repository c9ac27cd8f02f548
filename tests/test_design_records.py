"""Every design record says whether it still holds and when it was written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design"
RECORDS = sorted(DESIGN.glob("[0-9][0-9][0-9]-*.md"))
STATUS = re.compile(
    r"^- Status: (Proposed|Accepted|Superseded by \[(\d{3})\]\((\d{3})-[\w-]+\.md\))")
DATE = re.compile(r"^- Date: (\d{4})-(\d{2})-(\d{2})$")


def test_there_are_records() -> None:
    """The glob finds the records (so the per-record checks are not vacuous)."""
    assert len(RECORDS) >= 18


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_a_record_has_a_status_and_a_date(record: Path) -> None:
    """The title is followed by a `Status:` line (Proposed, Accepted, or Superseded by a record
    that exists) and a `Date:` line (ISO date)."""
    head = record.read_text(encoding="utf-8").splitlines()[:6]
    assert head[0].startswith(f"# {record.name[:3]}"), f"{record.name}: title first"
    status = next((m for line in head if (m := STATUS.match(line))), None)
    assert status is not None, f"{record.name}: no '- Status: ...' line under the title"
    if status.group(2):
        assert status.group(2) == status.group(3)
        assert list(DESIGN.glob(f"{status.group(2)}-*.md")), f"{record.name}: no such record"
    date = next((m for line in head if (m := DATE.match(line))), None)
    assert date is not None, f"{record.name}: no '- Date: YYYY-MM-DD' line under the title"
    assert 1 <= int(date.group(2)) <= 12 and 1 <= int(date.group(3)) <= 31, record.name
