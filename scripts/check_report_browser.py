"""Open the report in headless Chromium, screenshot each section, and fail on what a reader would trip over.

A Markdown-to-HTML page can look right in the source and still break on screen: an image whose file was never
committed, a table wider than the page, a script error. This check loads `outputs/report/report.html` the way
a reader's browser does and fails (exit 1, one line per problem) on

- a broken image (not loaded, or zero natural width),
- a console error or an uncaught page error,
- an element wider than the page (its right edge past the viewport; a table that scrolls inside its own
  box is fine, the page itself must not scroll sideways).

Each `<h2>` section is saved as `<shots>/NN_<section>.png` (default `outputs/report/screenshots/`, git-ignored)
so a person can look at what the page shows. The network stays closed: the page is self-contained and the
browser is started with every background fetch switched off.

Usage: `python scripts/check_report_browser.py [--report outputs/report/report.html] [--shots DIR]
[--chromium /usr/bin/chromium]`. Exit 0: clean; 1: problems found; 2: no page or no browser.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1280, 900

# every element whose right edge passes the page, skipping those inside a box that scrolls sideways
OVERFLOW_JS = """() => {
  const page = document.documentElement.clientWidth, out = [];
  const scrolls = el => { for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p); if (s.overflowX === 'auto' || s.overflowX === 'scroll') return true; }
    return false; };
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > page + 1 && !scrolls(el)) {
      out.push(`${el.tagName.toLowerCase()} ${Math.round(r.right)}px > ${page}px: ` +
               (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 60));
    }
  }
  if (document.documentElement.scrollWidth > page + 1) out.push(`page scrolls sideways: ${document.documentElement.scrollWidth}px`);
  return out; }"""
BROKEN_IMAGES_JS = """() => Array.from(document.images)
  .filter(img => !img.complete || img.naturalWidth === 0)
  .map(img => `broken image: ${img.alt || img.src.slice(0, 60)}`)"""


def find_chromium(explicit: str | None = None) -> str | None:
    """The browser binary: the one named, else Debian's `chromium` (or `chromium-browser`) on PATH."""
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "section"


def check(report: Path, shots: Path, chromium: str) -> list[str]:
    """Problems found on the page (empty: clean); one PNG per section into `shots`."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):       # one run's screenshots, never a mix of two
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="report-browser-") as profile, sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            profile, executable_path=chromium, headless=True, args=FLAGS,
            viewport={"width": WIDTH, "height": HEIGHT})
        try:
            page = browser.new_page()
            page.on("console", lambda msg: msg.type == "error" and problems.append(f"console error: {msg.text}"))
            page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
            page.goto(report.resolve().as_uri(), wait_until="load")
            problems += page.evaluate(BROKEN_IMAGES_JS)
            problems += page.evaluate(OVERFLOW_JS)
            headings = page.locator("h1, h2")
            count = headings.count()
            tops = [headings.nth(i).evaluate("h => h.getBoundingClientRect().top + window.scrollY")
                    for i in range(count)]
            bottom = page.evaluate("document.documentElement.scrollHeight")
            for i in range(count):
                top, end = tops[i], (tops[i + 1] if i + 1 < count else bottom)
                name = headings.nth(i).inner_text()
                # the section's full height (long sections are cut at 8,000 px so a PNG stays viewable)
                clip = {"x": 0, "y": max(top - 8, 0), "width": WIDTH, "height": max(min(end - top, 8000), 40)}
                page.screenshot(path=str(shots / f"{i:02d}_{slug(name)}.png"), clip=clip, full_page=True)
        finally:
            browser.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=Path("outputs/report/report.html"))
    parser.add_argument("--shots", type=Path, default=None, help="screenshot folder (default <report dir>/screenshots)")
    parser.add_argument("--chromium", default=None, help="browser binary (default: chromium on PATH)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"error: {args.report} does not exist: run `make report` first", file=sys.stderr)
        return 2
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("error: no Chromium found: `apt-get install chromium` or pass --chromium <binary>", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("error: playwright is not installed: `pip install -e '.[dev]'` (it drives the installed Chromium; "
              "no browser download needed)", file=sys.stderr)
        return 2
    shots = args.shots or args.report.parent / "screenshots"
    problems = check(args.report, shots, chromium)
    for problem in problems:
        print(f"problem: {problem}")
    print(f"{len(problems)} problem(s); screenshots of each section in {shots}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
