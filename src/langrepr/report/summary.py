"""Per-table and per-paper summaries, and the README's status rows and the docs' claim lines drawn from the table JSONs."""

from __future__ import annotations

import re
from pathlib import Path

from langrepr.report.artefacts import PAPERS, claim_mark, load_tables, not_rendered
from langrepr.tables import cell_wall, lean_words
from langrepr.utils import write_text_atomic

# ---------------------------------------------------------------- the page

def table_summary(table: dict) -> dict:
    cells = [c for r in table["rows"] for c in r["cells"].values()]
    marks = [claim_mark(c.get("holds"), c) for c in table.get("claims", [])]
    return {"run": sum(c["ours"] is not None for c in cells), "total": len(cells),
            "claims": ", ".join(f"{marks.count(m)} {m}" for m in dict.fromkeys(marks)) or "—",
            "seeds": ", ".join(map(str, table.get("seeds", []))) or "none"}


def summary_line(entry: dict) -> str:
    """The report's summary row of one table (a test checks the committed report holds today's rows)."""
    t, s = entry["table"], table_summary(entry["table"])
    return (f"| [{t['table']}](#{entry['stem'].replace('.', '')}) | {t.get('profile')} | "
            f"{s['run']}/{s['total']} | {s['seeds']} | {s['claims']} | `{t.get('commit')}` |")


def generic_markdown(table: dict) -> str:
    """Only for a JSON whose Markdown twin is missing: the same cells, printed with 4 significant digits."""
    def num(v: float | None) -> str:
        return "not run" if v is None else f"{v:.4g}"

    lines = ["| | " + " | ".join(table["columns"]) + " |", "|---" * (len(table["columns"]) + 1) + "|"]
    for row in table["rows"]:
        parts = []
        for name in table["columns"]:
            c = row["cells"][name]
            delta = num(c["ours"] - c["paper"]) if c["ours"] is not None and c["paper"] is not None else "—"
            parts.append(f"{num(c['ours'])} / {'—' if c['paper'] is None else num(c['paper'])} / {delta}")
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    lines += [""] + [f"- {claim_mark(c.get('holds'), c)} {c['text']}" for c in table.get("claims", [])]
    return "\n".join(lines)


def demote(markdown: str) -> str:
    """The table's own `# Title` becomes a third-level heading inside the report."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", markdown, flags=re.M)


def paper_of(table: dict) -> str:
    return table["table"].split("_")[0]


def claim_counts(claims: list[dict]) -> dict:
    """Claims by verdict, and which way the within-noise ones lean (see `verdicts.leaning`)."""
    marks = [claim_mark(c.get("holds"), c) for c in claims]
    noise = [c for c, m in zip(claims, marks) if m == "within noise"]
    return {"marks": marks, "with": sum(c.get("lean") == "with" for c in noise),
            "against": sum(c.get("lean") == "against" for c in noise),
            "beyond_margin": sum(bool(c.get("margin_exceeded")) for c in noise), "noise": len(noise)}


def not_run_lines(tables: list[dict], missing: list[str]) -> list[str]:
    """What of one paper was not run, and why, as far as the table JSONs say it."""
    parts = [f"{m} has no rendered table (`make {m.replace('_', '-')} PROFILE=quick`)" for m in missing]
    for t in tables:
        cells = [c for r in t["rows"] for c in r["cells"].values()]
        empty = sum(c["ours"] is None for c in cells)
        if not empty:
            continue
        why = [f"{name} not run on this profile: {reason.split('. ')[0].rstrip('.')}"
               for name, reason in (t.get("not_run") or {}).items()]
        rest = empty - sum(c["ours"] is None and bool(c.get("not_run")) for c in cells)
        if rest:
            why.append(f"{rest} without a finished run, see its notes")
        parts.append(f"{t['table']}: {empty} of {len(cells)} cells not run ({'; '.join(why)})")
    return parts


def paper_summary(entries: list[dict]) -> list[str]:
    """The page's opening: per paper, claims by verdict, the lean of the undecided ones, what did not run."""
    lines = ["| paper | tables | cells run | claims ✓ | ✗ | within noise (means lean with / against the paper) | "
             "noise unknown | not judged | claims not run |", "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    missing = not_rendered(entries)
    for paper, name in PAPERS.items():
        tables = [e["table"] for e in entries if paper_of(e["table"]) == paper]
        gone = [m for m in missing if m.split("_")[0] == paper]
        counts = claim_counts([c for t in tables for c in t.get("claims", [])])
        marks = counts["marks"]
        cells = [c for t in tables for r in t["rows"] for c in r["cells"].values()]
        profiles = ", ".join(f"{n} {p}" for p, n in sorted(
            {p: sum(t.get("profile") == p for t in tables) for p in {t.get("profile") for t in tables}}.items()))
        lines.append(f"| {name} | {len(tables)} ({profiles or 'none'}) | {sum(c['ours'] is not None for c in cells)}/"
                     f"{len(cells)} | {marks.count('✓')} | {marks.count('✗')} | {counts['noise']} "
                     f"({counts['with']} with / {counts['against']} against) | {marks.count('noise unknown')} | "
                     f"{marks.count('not judged')} | {marks.count('not run')} |")
        lean = "no claim is within noise"
        if counts["noise"]:
            side = ("with the paper" if counts["with"] > counts["against"] else "against the paper"
                    if counts["against"] > counts["with"] else "evenly")
            lean = (f"of {counts['noise']} claims within noise, the means of {counts['with']} lean with the paper and "
                    f"of {counts['against']} against it (on balance {side})" if side != "evenly" else
                    f"of {counts['noise']} claims within noise, the means lean with the paper and against it "
                    f"equally ({counts['with']} each)")
            if counts["beyond_margin"]:
                lean += (f"; {counts['beyond_margin']} equivalence claim(s) have |d| beyond their margin, the noise "
                         "too wide to call them ✗")
        gaps = not_run_lines(tables, gone)
        notes.append(f"- **{name}**: {lean}. " + (f"Not run: {'; '.join(gaps)}." if gaps else "Every cell ran."))
    return lines + [""] + notes


def paragraphs(markdown: str) -> str:
    """Consecutive plain lines become separate paragraphs, so a header's lines never run together on the page."""
    def plain(line: str) -> bool:   # not a list item, table row, heading, image, HTML or continuation line
        return bool(line.strip()) and not re.match(r"\s|[|#><]|!\[|[-*+] |\d+\. ", line)

    out: list[str] = []
    for line in markdown.splitlines():
        if plain(line) and out and plain(out[-1]):
            out.append("")
        out.append(line)
    return "\n".join(out)


def status_lines(outputs: Path) -> list[str]:
    """The README's status table: one row per rendered table, drawn from its JSON so it cannot go stale."""
    lines = ["| paper | table | profile | cells run | seeds | claims | cell time | commit |",
             "|---|---|---|---|---|---|---|---|"]
    shown = []
    for entry in load_tables(outputs):
        t, s = entry["table"], table_summary(entry["table"])
        shown.append(t)
        paper = PAPERS.get(t["table"].split("_")[0], t["table"].split("_")[0])
        wall = t.get("cell_wall")
        minutes = f"{wall['seconds'] / 60:.0f} min" if wall and wall["runs"] > wall["untimed_runs"] else "—"
        lines.append(f"| {paper} | [{t['table']}](outputs/tables/{entry['stem']}.md) | {t.get('profile')} | "
                     f"{s['run']}/{s['total']} | {s['seeds']} | {s['claims']} | {minutes} | `{t.get('commit')}` |")
    for profile in sorted({t.get("profile") for t in shown}):
        tables = [t for t in shown if t.get("profile") == profile]
        wall = cell_wall([row for t in tables for row in t["rows"]])   # a run shared by tables counted once
        seconds, untimed = wall["seconds"], wall["untimed_runs"]
        timed = wall["runs"] - untimed
        older = f"{untimed} runs were rendered before cell times were kept (\"—\")" if untimed else ""
        if not timed:
            lines += ["", f"Cell time ({profile}): not recorded yet; {older}"]
            continue
        total = f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds / 60:.1f} min"
        behind = f"{len(tables)} table" + ("s" if len(tables) != 1 else "")
        lines += ["", f"Cell time ({profile}): {total} over the {timed} recorded runs behind "
                  f"{behind}, each run counted once (one process per cell, at the load of its run; "
                  f"upstream stages the cells reuse, renders and set-up not counted)" + (f"; {older}" if older else "")]
    return lines


def paper_claim_lines(outputs: Path, paper: str) -> list[str]:
    """A paper page's measured summary: per rendered table, its claim verdicts with our numbers (from the JSON)."""
    lines = []
    for entry in load_tables(outputs):
        t = entry["table"]
        if paper_of(t) != paper:
            continue
        seeds = ", ".join(map(str, t.get("seeds", []))) or "none"
        lines += ["", f"**{t['title']}** ({t.get('profile')}; seeds {seeds}; commit `{t.get('commit')}`; "
                  f"[table](../outputs/tables/{entry['stem']}.md))", ""]
        for c in t.get("claims", []):
            ours = " vs ".join("—" if v is None else f"{v:.4g}" for v in c.get("ours", []))
            why = f" ({c['reason']})" if c.get("reason") and c.get("verdict") not in ("✓", "✗") else ""
            if lean_words(c):   # "(means lean against the paper, |d| beyond the margin: |d| = 5.96, bound 8, margin 2)"
                beyond = ", |d| beyond the margin" if c.get("margin_exceeded") else ""
                why = f" (means lean {c['lean']} the paper{beyond}: {c.get('reason') or 'within noise'})"
            mark = claim_mark(c.get("holds"), c)
            lines.append(f"- {mark if mark in ('✓', '✗') else mark + ':'} {c['text']}: ours {ours}{why}")
        if not t.get("claims"):
            lines.append("- (no claims of the paper map onto this table)")
    return lines[1:] if lines else ["No table of this paper is rendered yet."]


def refresh_block(path: Path, name: str, lines: list[str]) -> bool:
    """Replace the text between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`; False if no markers."""
    if not path.exists():
        return False
    text = path.read_text()
    begin, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    new = head + begin + "\n" + "\n".join(lines) + "\n" + end + tail
    if new != text:
        write_text_atomic(path, new)
    return True
