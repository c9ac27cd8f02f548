"""A real browser opens the HTML report of the golden Certification fixture.

Headless Chromium (Debian's ``chromium``, which ``make test`` installs when missing) driven by
Playwright for Python through ``executable_path`` (no browser is downloaded). The page must
load with no console errors and no network request, draw one series per measured group with
one point per message size and the threshold line, list one row per node, and its filters must
work. A PNG screenshot is left under the test's tmp dir.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from cre.testing.apiserver import Emulator

from .conftest import RunCli, in_thread

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
pytestmark = pytest.mark.anyio


def _browser_available() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return ("Debian package chromium is not installed (make test installs it with "
                "apt-get install chromium when it can)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


def _inspect(html: Path, screenshot: Path) -> dict[str, object]:
    """Open the report in Chromium and read what a person would see."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM,
                                     args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            charts = page.locator("svg.bw-chart")
            first = charts.first
            series = first.locator("g.series")
            points = [series.nth(i).locator("circle.point").count()
                      for i in range(series.count())]
            groups = [series.nth(i).get_attribute("data-group") for i in range(series.count())]
            result: dict[str, object] = {
                "charts": charts.count(),
                "groups": groups,
                "points": points,
                "polylines": first.locator("g.series polyline").count(),
                "thresholds": first.locator("line.threshold").count(),
                "threshold_gbps": first.locator("line.threshold").get_attribute("data-gbps"),
                "rows": page.locator("#nodes tbody tr").count(),
                "logs": page.locator("details.failure-log").count(),
                "log_text": page.locator("details.failure-log pre").first.text_content(),
            }
            page.select_option("#filter-verdict", "Failed")
            result["failed_rows"] = page.locator("#nodes tbody tr:visible").count()
            page.select_option("#filter-verdict", "")
            page.fill("#filter-node", "gpu-01")
            result["searched_rows"] = page.locator("#nodes tbody tr:visible").count()
            result["count_text"] = page.locator("#node-count").text_content()
            page.fill("#filter-node", "")
            page.screenshot(path=str(screenshot), full_page=True)
            result["errors"] = errors
            result["requests"] = [u for u in requests if not u.startswith("file:")]
            return result
        finally:
            browser.close()


async def test_the_html_report_in_a_real_browser(gpu_cert: Emulator, cre: RunCli,
                                                 tmp_path: Path) -> None:
    """Charts, threshold, node table, filters and folded logs as the fixture implies."""
    reason = _browser_available()
    if reason is not None:
        pytest.skip(reason)
    html = tmp_path / "report.html"
    run = await in_thread(cre, "report", "gpu-cert", "-n", "team-a", "--html", str(html),
                          "--kubeconfig", str(gpu_cert.kubeconfig_path))
    assert run.code == 0, run.err
    assert run.err.strip() == f"wrote {html}"
    text = html.read_text(encoding="utf-8")
    assert "<script src" not in text and "<link" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    screenshot = tmp_path / "report.png"
    seen = await anyio.to_thread.run_sync(_inspect, html, screenshot)
    assert seen["errors"] == []
    assert seen["requests"] == []
    # nccl-all-reduce is measured (3 groups: 8, 3 and 8 sizes); dcgm-level1 is not.
    assert seen["charts"] == 1
    assert seen["groups"] == ["group-0", "group-1", "group-2"]
    assert seen["points"] == [8, 3, 8]
    assert seen["polylines"] == 3
    assert seen["thresholds"] == 1 and seen["threshold_gbps"] == "300.00"
    assert seen["rows"] == 6
    assert seen["failed_rows"] == 4
    assert seen["searched_rows"] == 1 and seen["count_text"] == "1 of 6 nodes"
    assert seen["logs"] == 1 and "NCCL WARN Net : Connection closed" in str(seen["log_text"])
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _inspect_log_and_nodes(html: Path, screenshot: Path) -> dict[str, object]:
    """Open a report with a long failure log and a loopback category, read what a person sees."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM,
                                     args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            measure = """(d) => {
              const pre = d.querySelector('pre'), first = d.querySelector('.first-error');
              const p = pre.getBoundingClientRect(), f = first.getBoundingClientRect();
              return {open: d.open, scrollTop: pre.scrollTop, wide: pre.scrollWidth,
                      width: pre.clientWidth, visible: f.top >= p.top && f.bottom <= p.bottom,
                      firstText: first.textContent};
            }"""
            log = page.locator("details.failure-log").first
            opened = log.evaluate(measure)
            log.evaluate("d => { d.open = false; d.querySelector('pre').scrollTop = 0; }")
            page.locator("a.to-error").click()
            page.wait_for_timeout(100)
            linked = log.evaluate(measure)
            outlier_fill = page.locator("svg.node-chart g.outlier rect.bar").first.evaluate(
                "r => getComputedStyle(r).fill")
            normal_fill = page.locator("svg.node-chart g.node-series:not(.outlier) rect.bar"
                                       ).first.evaluate("r => getComputedStyle(r).fill")
            page.screenshot(path=str(screenshot), full_page=True)
            return {"errors": errors, "opened": opened, "linked": linked,
                    "bars": page.locator("svg.node-chart g.node-series").count(),
                    "outlier_fill": outlier_fill, "normal_fill": normal_fill}
        finally:
            browser.close()


async def test_the_failure_log_opens_at_its_first_warn_line_and_wraps(tmp_path: Path) -> None:
    """A long failure log (200 INFO lines, then the WARN line, then a 900-character line) opens
    scrolled so its first NCCL WARN line is in view, never scrolls sideways, and the headline's
    link reopens it there; the loopback node chart paints the slow node red."""
    reason = _browser_available()
    if reason is not None:
        pytest.skip(reason)
    import attrs

    from cre.cli.htmlreport import render_html
    from cre.core.certification.report import build_report

    from .test_htmlreport import LOOPBACK, snapshot

    gpu = build_report(snapshot(Path(__file__).parent / "fixtures" / "gpu-cert.yaml"))
    category = gpu.categories[0]
    group = category.groups[1]
    assert group.failure_log is not None
    chatter = "".join(f"gpu-03:41:41 [0] NCCL INFO Channel {i:02d} via NET/IB/0\n"
                      for i in range(200))
    tail = (chatter + "gpu-04:52:52 [3] NCCL WARN Net : Connection closed by remote peer\n"
            + "x" * 900 + "\nmpirun detected that one or more processes exited with non-zero "
            "status\n")
    long_log = attrs.evolve(group, failure_log=attrs.evolve(group.failure_log, tail=tail))
    groups = (category.groups[0], long_log, *category.groups[2:])
    loop = build_report(snapshot(LOOPBACK)).categories[0]
    report = attrs.evolve(gpu, categories=(attrs.evolve(category, groups=groups), loop))
    html = tmp_path / "long.html"
    html.write_text(render_html(report), encoding="utf-8")
    seen = await anyio.to_thread.run_sync(_inspect_log_and_nodes, html, tmp_path / "long.png")
    assert seen["errors"] == []
    opened, linked = seen["opened"], seen["linked"]
    assert isinstance(opened, dict) and isinstance(linked, dict)
    assert opened["open"] is True and opened["scrollTop"] > 0 and opened["visible"] is True
    assert "NCCL WARN Net : Connection closed" in opened["firstText"]
    assert opened["wide"] <= opened["width"]
    assert linked["open"] is True and linked["scrollTop"] > 0 and linked["visible"] is True
    assert seen["bars"] == 8
    assert seen["outlier_fill"] == "rgb(197, 34, 31)"
    assert seen["normal_fill"] == "rgb(31, 119, 180)"
