"""The Markdown of a rendered table: cells, claim lines, floors and the header."""

from __future__ import annotations

from langrepr import verdicts

# ---------------------------------------------------------------- Markdown

def fmt(value: float | None, pattern: str) -> str:
    return "not run" if value is None else pattern.format(value)


def fmt_ours(cell: dict, pattern: str) -> str:
    dry = cell.get("dry")
    if dry is not None:   # a dry render: what the 2-step run of this cell found, never a number
        if dry["failed"]:
            return "dry ✗ failed"
        if dry["missing_data"]:
            return "dry: no data"
        if dry["skipped"]:
            return "dry: skipped"   # not "not run": reference rows show "not run" as "—"
        return "dry ✓" if dry["ok"] else "not run"
    if cell["ours"] is None:
        if cell.get("stale"):
            return "stale (metric redefined since it ran; re-run)"
        return "diverged" if cell.get("diverged") else "not run"
    return fmt(cell["ours"], pattern) + (f" ± {pattern.format(cell['std'])}" if cell["std"] is not None else "")


def claim_line(claim: dict, formats: list[str]) -> str:
    verdict = claim.get("verdict") or {True: "✓", False: "✗", None: "not judged", "noise": "within noise"}[claim["holds"]]
    ours = [fmt(v, f) for v, f in zip(claim["ours"], formats)]
    paper = [fmt(v, f).replace("not run", "—") for v, f in zip(claim["paper"], formats)]
    numbers = f"ours {' vs '.join(ours)} (paper {' vs '.join(paper)})"
    reason = f" [{claim['reason']}]" if claim.get("reason") and verdict not in ("✓", "✗", "within noise") else ""
    if verdict in ("✓", "✗", "within noise") and claim.get("reason", "").startswith("deterministic"):
        reason = " [deterministic: no noise test]"
    mark = verdict if verdict in ("✓", "✗") else f"{verdict}:"
    source = f" — {claim['source']}" if claim.get("source") else ""
    return f"- {mark} {claim['text']}: {numbers}{lean_words(claim)}{reason}{source}"


def lean_words(claim: dict) -> str:
    """The "(means lean with/against the paper)" of a within-noise line.

    An undecided verdict still says where the means point; an equivalence whose |d| is beyond its margin says
    that too (both recorded by `verdicts.judge`).
    """
    if claim.get("verdict") != "within noise" or claim.get("lean") not in ("with", "against"):
        return ""
    beyond = ""
    if claim.get("margin_exceeded") and claim.get("diff") is not None:
        beyond = f"; |d| = {abs(claim['diff']):.3g} exceeds the margin {float(claim['margin']):g}"
    return f" (means lean {claim['lean']} the paper{beyond})"


def floor_lines(table: dict, formats: dict) -> list[str]:
    """Per model row: does it clear each column's learning floor?"""
    lines = []
    for row in table["rows"]:
        if row.get("reference"):
            continue
        parts = []
        for name in table["columns"]:
            floor = row["cells"][name].get("floor")
            if not floor or floor.get("clears") is None:
                continue
            f = formats[name]
            gap = f.format(floor["gap"])
            bound = "" if floor.get("bound") is None else f", noise {f.format(floor['bound'])}"
            verdict = "clears" if floor["clears"] else "**below**"
            parts.append(f"{name}: {verdict} {floor['reference']} (gap {gap}; needs > margin {floor['margin']:g}{bound})")
        if parts:
            lines.append(f"- {row['key']}: " + "; ".join(parts))
    return lines


def header_lines(table: dict) -> list[str]:
    """Title, profile, seeds, commit, provenance warning, data line and what the cells cost: every table's head."""
    seeds = ", ".join(map(str, table["seeds"])) or "none"
    lines = [f"# {table['title']}", "",
             f"Profile: **{table['profile']}** · seeds: {seeds} · commit: `{table['commit']}`"]
    if table.get("dirty_commits"):
        lines.append(f"**Provenance warning:** some cells ran from uncommitted code ({', '.join(table['dirty_commits'])}).")
    if table.get("data"):
        lines.append(f"Data: {table['data']}")
    wall = table.get("cell_wall")
    if wall and wall["runs"]:
        untimed = f"; {wall['untimed_runs']} without a recorded time" if wall["untimed_runs"] else ""
        lines.append(f"Cell wall time: {wall['seconds'] / 60:.1f} min over {wall['runs']} runs (the sum of the cells' "
                     f"own records, each one process at the load of its run; upstream stages the cells reuse, such as "
                     f"pretrained checkpoints or cached vectors, not counted{untimed})")
    return lines


DERIVED = "†"   # marks a column computed from other cells of the table, never measured itself


def derived_columns(spec: dict) -> dict[str, str]:
    """`{column: how it is computed}` for the columns the renderer derives (`ratio_of`, `quotient`)."""
    bases = {r["key"]: r.get("ratio_base") or r["key"] for r in spec["rows"]}
    out = {}
    for column in spec["columns"]:
        if column.get("ratio_of"):
            named = sorted({b for k, b in bases.items() if b != k})
            over = f"its ratio-base row's ({', '.join(named)})" if named else "the same row's"
            out[column["name"]] = f"each row's {column['ratio_of']} / {over}"
        elif column.get("quotient"):
            out[column["name"]] = " / ".join(column["quotient"]) + " of the same row"
    return out


def header_row(table: dict, derived: dict[str, str]) -> str:
    return "| | " + " | ".join(f"{n} {DERIVED}" if n in derived else n for n in table["columns"]) + " |"


def to_markdown(table: dict, spec: dict) -> str:
    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    derived = {n: how for n, how in derived_columns(spec).items() if n in table["columns"]}
    lines = header_lines(table)
    lines += ["", "Each cell: ours (± std over seeds) / paper / Δ = ours − paper. \"not run\" = no finished run."]
    if derived:
        lines.append(f"{DERIVED} derived from other cells, not measured: "
                     + "; ".join(f"{n} = {how}" for n, how in derived.items()) + ".")
    lines.append("")
    models = [r for r in table["rows"] if not r.get("reference")]
    references = [r for r in table["rows"] if r.get("reference")]
    lines.append(header_row(table, derived))
    lines.append("|---" * (len(table["columns"]) + 1) + "|")
    for row in models:
        parts = []
        for name in table["columns"]:
            cell, f = row["cells"][name], formats[name]
            paper = "—" if cell["paper"] is None else f.format(cell["paper"])
            delta = (f.format(cell["ours"] - cell["paper"])
                     if cell["ours"] is not None and cell["paper"] is not None else "—")
            parts.append(f"{fmt_ours(cell, f)} / {paper} / {delta}")
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    if references:
        lines += ["", "Reference rows (same split and pipeline; not models of the paper; ours ± std; (floor) marks "
                  "a column's learning floor, (ceiling) a bound from above, the rest are comparators):", ""]
        lines.append(header_row(table, derived))
        lines.append("|---" * (len(table["columns"]) + 1) + "|")
        for row in references:
            cells = [fmt_ours(row["cells"][n], formats[n]).replace("not run", "—")
                     + (f" ({row['cells'][n]['role']})" if row["cells"][n].get("role") not in (None, "comparator")
                        and row["cells"][n]["ours"] is not None else "")
                     for n in table["columns"]]
            lines.append(f"| {row['key']} | " + " | ".join(cells) + " |")
    floors = floor_lines(table, formats)
    if floors:
        lines += ["", "Learning floor (a model cell must beat its column's floor row by the margin plus the seed "
                  "noise; claims on a cell below it are not judged):", ""] + floors
    if table["claims"]:
        lines += ["", "Claims of the paper for this table, judged on our numbers (✓/✗ only when the gap exceeds "
                  f"the seed noise: Welch's t, two-sided {verdicts.LEVEL:.0%}; equivalence claims against their "
                  "stated margin):", ""]
        for claim, spec_claim in zip(table["claims"], spec.get("claims", [])):
            fa = formats.get(spec_claim["a"][1], "{:.2f}")
            fb = formats.get(spec_claim["b"][1], fa) if spec_claim.get("b") else fa
            lines.append(claim_line(claim, [fa, fb]))
        if not spec.get("judge_claims", True):
            lines.append(f"- (not judged on this profile: {spec.get('no_judge_reason', 'see data note')})")
    if table.get("not_run"):
        lines += ["", "Columns not run on this profile (their cells say \"not run\" whatever the runs recorded):", ""]
        lines += [f"- {name}: {reason}" for name, reason in table["not_run"].items()]
    if table.get("orphans"):
        lines += ["", "Measured cells of the JSON that the spec no longer names (kept as measured, not judged; "
                  "rename the spec's row or column back, or re-run it):", ""]
        lines += [f"- {o['row']} / {o['column']}: {fmt_ours(o['cell'], formats.get(o['column'], '{:.2f}'))} "
                  f"(n = {o['cell'].get('n') or 0})" for o in table["orphans"]]
    if table["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in table["notes"]]
    return "\n".join(lines) + "\n"
