"""The `table:` node of an experiment: its spec, the run ids it reads, its shared and filled notes."""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf

from langrepr.errors import UserError
from langrepr.table_spec import TableSpec, normalised, note_text
from langrepr.tables.markdown import fmt


def table_spec(cfg: DictConfig, table: str) -> dict:
    spec = normalised(OmegaConf.to_container(cfg.table, resolve=True))   # keyed by id: lists
    spec.setdefault("name", table)
    TableSpec.parse(spec)  # one clear line on a typo, before any run is read
    for row in spec["rows"]:
        row.setdefault("run_id", cfg.run_id)
    return spec


def spec_run_ids(spec: dict) -> set[str]:
    """Every run_id whose cells fill this table: its rows', its rows' `sources`' and its columns'."""
    return ({row["run_id"] for row in spec["rows"]}
            | {src["run_id"] for row in spec["rows"] for src in row.get("sources", {}).values() if src.get("run_id")}
            | {c["run_id"] for c in spec["columns"] if c.get("run_id")})


def shared_notes(spec: dict, main_run_id: str) -> list[str]:
    """Notes naming the other tables whose cells fill rows or columns here, and the target that runs them."""
    notes = []
    for rid in sorted(spec_run_ids(spec) - {main_run_id}):
        make = f"`make {rid.replace('_', '-')}` runs them."
        shared = ", ".join(r["key"] for r in spec["rows"] if r["run_id"] == rid)
        if shared:
            notes.append(f"Rows {shared} are the cells of {rid} (same configuration); {make}")
        sourced = sorted({c for r in spec["rows"] for c, src in r.get("sources", {}).items() if src.get("run_id") == rid}
                         | {c["name"] for c in spec["columns"] if c.get("run_id") == rid})
        if sourced:
            notes.append(f"Columns {', '.join(sourced)} of the model rows are the cells of {rid}; {make}")
    return notes


PLACEHOLDER = re.compile(r"\{=([^{}]+)\}")   # {=LEAM.AG News} or {=LEAM.AG News:std} in a note


def filled_notes(notes: list[str | dict], rows: list[dict], spec: dict) -> list[str]:
    """Notes as printed: each `{=<row>.<column>[:std|:n]}` filled in.

    A placeholder is replaced by that cell of this table, in its column's format, and a quoted note
    (`{text, quoted_from}`) is followed by its source.

    A note that quotes its own table takes the number from the table's data, so a re-run cannot leave it stale;
    a placeholder naming no cell is one line, not a note that silently says "{=...}".
    """
    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    cells = {(r["key"], name): cell for r in rows for name, cell in r["cells"].items()}

    def value(match: re.Match) -> str:
        ref, _, part = match.group(1).rpartition(":")   # row keys may hold colons ("Reference: unigram")
        part = part.strip()
        if part not in ("std", "n"):
            ref, part = match.group(1), ""
        for i in [i for i, ch in enumerate(ref) if ch == "."]:   # row keys may hold dots: try every split
            cell = cells.get((ref[:i].strip(), ref[i + 1:].strip()))
            if cell is not None:
                number = cell.get(part or "ours")
                if part == "n":
                    return str(number or 0)
                return fmt(number, formats[ref[i + 1:].strip()])
        raise UserError(f"table {spec['name']}: note placeholder {match.group(0)} names no cell: write "
                        "{=<row key>.<column name>}, optionally with :std or :n")

    return [PLACEHOLDER.sub(value, note_text(note)) for note in notes]


def table_stem(table: str, profile_name: str) -> str:
    return table if profile_name in ("full", "exact") else f"{table}.{profile_name}"
