"""`scripts/check_report_browser.py`: a page a reader would trip over (broken image, script error, overflow) fails."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "check_report_browser.py"
spec = importlib.util.spec_from_file_location("check_report_browser", SCRIPT)
check_report_browser = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_report_browser)

needs_browser = pytest.mark.skipif(
    check_report_browser.find_chromium() is None or importlib.util.find_spec("playwright") is None,
    reason="needs Chromium (`apt-get install chromium`) and playwright (`pip install -e '.[dev]'`)")

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{max-width:600px}</style></head><body>
<h1>Report</h1><p>intro</p>
<h2>Fine</h2><div style="overflow-x:auto"><table><tr><td style="min-width:3000px">wide but scrolls</td></tr></table></div>
<h2>Broken</h2><img alt="missing curves" src="img/nowhere.png">
<div style="width:3000px">wider than the page</div>
<script>console.error("boom")</script>
</body></html>"""


@needs_browser
def test_a_broken_image_a_console_error_and_an_overflowing_element_fail_with_a_screenshot_per_section(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(PAGE)
    done = subprocess.run([sys.executable, str(SCRIPT), "--report", str(page), "--shots", str(tmp_path / "shots")],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stdout + done.stderr
    problems = [line for line in done.stdout.splitlines() if line.startswith("problem: ")]
    assert any("broken image: missing curves" in p for p in problems)
    assert any("console error: boom" in p for p in problems)
    assert any(p.startswith("problem: div ") and "wider than the page" in p for p in problems)
    assert not any("wide but scrolls" in p for p in problems)         # a table scrolling in its own box is fine
    shots = sorted(p.name for p in (tmp_path / "shots").glob("*.png"))
    assert shots == ["00_report.png", "01_fine.png", "02_broken.png"]


def test_no_page_is_one_line_exit_2(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--report", str(tmp_path / "none.html")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "run `make report` first" in done.stderr
