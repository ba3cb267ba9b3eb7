"""Derived columns, the noise floors and the claims judged on the built rows (`langrepr.verdicts`)."""

from __future__ import annotations

from langrepr import verdicts
from langrepr.errors import UserError
from langrepr.table_spec import TableSpec


def derive_ratios(spec: dict, rows: list[dict], only: set[str] | None = None) -> None:
    """Derived columns: `ratio_of: <column>` (this row over its `ratio_base` row) and `quotient: [a, b]`.

    `only`: derive just the columns computed from these columns (a re-judge that re-read them).
    """
    by_key = {r["key"]: r for r in rows}
    row_specs = {r["key"]: r for r in spec["rows"]}
    for column in spec["columns"]:
        if only is not None and not ({column.get("ratio_of"), *(column.get("quotient") or [])} & only):
            continue
        if column.get("quotient"):
            num, den = column["quotient"]
            for row in rows:
                a, b = row["cells"][num]["ours"], row["cells"][den]["ours"]
                row["cells"][column["name"]].update(ours=a / b if a is not None and b else None,
                                                    runs=row["cells"][num]["runs"], n=row["cells"][num]["n"],
                                                    seeds=row["cells"][num]["seeds"],
                                                    commits=row["cells"][num]["commits"])
                if "dry" in row["cells"][num]:
                    row["cells"][column["name"]]["dry"] = row["cells"][num]["dry"]
        source = column.get("ratio_of")
        if not source:
            continue
        for row in rows:
            base = by_key.get(row_specs[row["key"]].get("ratio_base", row["key"]))
            ours = row["cells"][source]["ours"]
            denom = base["cells"][source]["ours"] if base else None
            cell = row["cells"][column["name"]]
            cell["ours"] = ours / denom if ours is not None and denom else None
            for key in ("runs", "n", "seeds", "commits"):
                cell[key] = row["cells"][source][key]
            if "dry" in row["cells"][source]:
                cell["dry"] = row["cells"][source]["dry"]
            if row["cells"][source].get("not_run"):
                cell["not_run"] = row["cells"][source]["not_run"]


def find_cell(rows: list[dict], ref: list) -> dict:
    for row in rows:
        if row["key"] == ref[0]:
            if ref[1] not in row["cells"]:
                raise UserError(f"claim refers to unknown column {ref[1]!r} of row {ref[0]!r}")
            return row["cells"][ref[1]]
    raise UserError(f"claim refers to unknown row {ref[0]!r}")


def apply_floors(spec: dict, rows: list[dict]) -> None:
    """Record each reference cell's role and whether each model cell clears its column's learning floor."""
    typed = TableSpec.parse(spec)
    by_key = {r["key"]: r for r in rows}
    row_specs = {r.key: r for r in typed.rows}
    for column in typed.columns:
        for row in rows:
            cell = row["cells"][column.name]
            if row["reference"]:
                cell["role"] = typed.role(row_specs[row["key"]], column)
                cell.pop("floor", None)
            elif (floor := typed.floor_of(row_specs[row["key"]], column)) and floor in by_key:
                status = verdicts.floor_status(cell, by_key[floor]["cells"][column.name], column.margin,
                                               column.better)
                cell["floor"] = {"reference": floor, **status}
            else:
                cell.pop("floor", None)


def claim_record(claim: dict, rows: list[dict], spec: dict) -> dict:
    """Everything a verdict reads, so it can be recomputed from the table JSON alone (`verdicts.judge`)."""
    def side(ref: list) -> dict:
        cell = find_cell(rows, ref)
        return {"row": ref[0], "column": ref[1], "mean": cell.get("ours"), "std": cell.get("std"),
                "n": cell.get("n", 0), "deterministic": cell.get("deterministic", False),
                "floor": cell.get("floor"), "stale": bool(cell.get("stale")) and cell.get("ours") is None,
                "not_run": cell.get("not_run", "")}
    record = {"text": claim["text"], "source": claim.get("source", ""), "op": claim["op"],
              "a": side(claim["a"]), "b": side(claim["b"]) if claim.get("b") else None,
              "judge": spec.get("judge_claims", True), "no_judge_reason": spec.get("no_judge_reason", "")}
    for key in ("value", "tol", "margin"):
        if claim.get(key) is not None:
            record[key] = claim[key]
    record["deterministic"] = bool(claim.get("deterministic", False))
    return record


def judge_claims(spec: dict, rows: list[dict]) -> list[dict]:
    """Each claim on our numbers, by the one rule of `langrepr.verdicts` (floor, Welch t, equivalence margin).

    The record keeps the old keys (`ours`, `paper`, `holds`) beside the inputs of the verdict.
    """
    judged = []
    for claim in spec.get("claims", []):
        record = claim_record(claim, rows, spec)
        a_cell = find_cell(rows, claim["a"])
        b_cell = find_cell(rows, claim["b"]) if claim.get("b") else None
        record["ours"] = [a_cell["ours"], b_cell["ours"]] if b_cell else [a_cell["ours"]]
        record["paper"] = [a_cell.get("paper"), b_cell.get("paper")] if b_cell else [a_cell.get("paper")]
        record.update(verdicts.judge(record))
        skipped = [f"{cell['column']} not run on this profile (the reason is under the table)"
                   for cell in (record["a"], record["b"]) if cell and cell.get("not_run")]
        if record["verdict"] == "not run" and skipped:
            record["reason"] = "; ".join(dict.fromkeys(skipped))
        judged.append(record)
    return judged
