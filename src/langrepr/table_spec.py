"""The typed `table:` node of an experiment file: what a rendered table holds and how its claims are judged.

A table spec is assembled by Hydra from the experiment file, its profile overlay and shared column files
(`conf/papers/<paper>/tables/`); `TableSpec.parse` checks the result when a table renders, so a typo in a spec is one line
naming the key and the keys that exist, not a KeyError deep in the renderer. Each field's docstring says what
it does; the README's "Adding a table" section points here.

`columns`, `rows`, `claims` and `notes` are lists or mappings keyed by an id (`normalised`): Hydra replaces a list
whole but merges a mapping, so a profile overlay keyed by id changes one entry (or drops it with a null) without
restating the others, and an entry added to the experiment file reaches every profile; a table built on another
(TensorCoder Table 3 on Table 2) states only what differs. A claim the paper makes of every data set is one entry
with `columns` (`all` or a list), repeated per column; a profile that runs fewer columns names them once in
`claim_columns`. A quoted sentence several claims rest on is written once in `sources` and
named by `source_of`.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field, fields
from typing import Any

from langrepr.errors import UserError

ROLES = ("floor", "ceiling", "comparator")
KEYED = {"columns": "name", "rows": "key", "claims": None, "notes": None}   # keyable lists: their id field
OPS = ("lt", "gt", "le", "ge", "ratio_ge", "ratio_le", "approx", "equiv", "stabler")


@dataclass
class ColumnSpec:
    """One column: where its value comes from, how it is shown, and its learning floor."""

    name: str
    """Header of the column; claims and rows refer to it by this name."""
    metric: str = ""
    """Key of `metrics.json`'s `metrics` (e.g. `test/bleu`), `params.<key>`, or a `{var}` pattern filled from a
    row's `vars`. Empty for derived columns (`ratio_of`, `quotient`)."""
    fmt: str = "{:.2f}"
    """Python format of a value in this column."""
    scale: float = 1.0
    """Factor applied to the recorded value (e.g. 100 for a fraction shown in %)."""
    match: dict = field(default_factory=dict)
    """Extra config choices a run must have to fill this column (e.g. a split or a task)."""
    config: str = ""
    """Read the value from this dotted key of the run's resolved config instead of a metric."""
    ratio_of: str = ""
    """Derived: this row's value in that column over its `ratio_base` row's value."""
    quotient: list = field(default_factory=list)
    """Derived: [numerator column, denominator column] of the same row."""
    floor: str = ""
    """Key of the reference row that is this column's learning floor (prior, majority, unigram, copy-source,
    random vectors). A model cell that does not beat it by more than `margin` plus the seed noise is "below the
    floor", and a claim on it is not judged."""
    margin: float = 0.0
    """How far beyond the floor (in the column's displayed unit) a model cell must be to count as learning."""
    better: str = "higher"
    """`higher` or `lower` (losses, perplexity): the direction in which a model should leave its floor."""
    ceiling: str = ""
    """Key of a reference row that bounds a model from above in this column (e.g. a per-word majority tagger
    for a probe that sees one word's vector). Recorded as its role; claims are not gated by it."""
    run_id: str = ""
    """Read this column from another experiment's cells (every row's, by the row's and this column's `match`):
    count cells that need no training, e.g. TensorCoder's attention GFLOPs at the paper's own N and d
    (`+paper_size=`, run_id `tensorcoder_paper_size`). `--rejudge` re-reads such a column from those cells when
    they are present, so a table gains it without re-running its trained cells."""
    task: dict = field(default_factory=dict)
    """The grid (`langrepr.grid`): this column's task entry ({datamodule, target, floor, comparator}) when it is
    not in the experiment's `grid.tasks` (a column added after the others ran: that node is every cell's
    identity). Empty for paper tables."""


@dataclass
class RowSpec:
    """One row: which runs fill it, the paper's values, and whether it is a reference (floor/ceiling/comparator)."""

    key: str
    """Row label; claims refer to it."""
    match: dict = field(default_factory=dict)
    """Config choices (`model: leam`) or dotted config keys whose runs fill this row."""
    paper: dict = field(default_factory=dict)
    """The paper's printed value per column."""
    reference: bool = False
    """Not a model of the paper: a floor, ceiling or comparator row on the same split and pipeline."""
    role: str = ""
    """A reference row's role in every column (`floor`, `ceiling`, `comparator`) unless a column names it as
    its `floor`/`ceiling`; default `comparator`."""
    deterministic: bool | None = None
    """A one-seed cell of this row has no seed variance (a prior, a majority count). Default: true for reference
    rows, false for model rows."""
    run_id: str = ""
    """Read this row from another experiment's cells (same configuration, computed once)."""
    sources: dict = field(default_factory=dict)
    """Per column `{run_id, match}`: this row's cell in that column comes from another table's cells."""
    vars: dict = field(default_factory=dict)
    """Values filled into `{name}` patterns of the columns' metric keys."""
    config: dict = field(default_factory=dict)
    """Per column: read the value from this dotted config key instead of the column's metric."""
    const: dict = field(default_factory=dict)
    """Per column: a fixed value (a definition, e.g. a ratio base of 1.0), never a measurement."""
    ratio_base: str = ""
    """Row that `ratio_of` columns divide by (default this row)."""
    floors: dict = field(default_factory=dict)
    """`{column floor row: reference row}`: this model row is judged against another reference row wherever a
    column's floor is the first (a 50-d vector row against random 50-d vectors, not the columns' random 200-d)."""


@dataclass
class ClaimSpec:
    """One claim sentence of the paper, as two cells (or a cell and a printed value) and an op."""

    text: str
    """The claim as the paper words it."""
    a: list
    """[row, column] of the claim's subject."""
    op: str
    """lt gt le ge (a vs b or `value`), ratio_ge ratio_le (a ≥/≤ value·b), approx (|a − value| ≤ tol, a
    deterministic count), equiv (|a − b| within `margin`), stabler (a's seed spread smaller than b's)."""
    b: list = field(default_factory=list)
    """[row, column] of the other side; empty to compare with `value`."""
    value: float | None = None
    """The printed value (approx, or an op without b) or the ratio factor v (ratio_*)."""
    tol: float | None = None
    """approx: the printed value's precision."""
    margin: float | None = None
    """equiv: the largest gap the paper's "comparable" admits, in the column's unit."""
    deterministic: bool = False
    """Both sides are deterministic counts (parameters, FLOPs): no noise test."""
    source: str = ""
    """Paper section and the quoted sentence the claim comes from."""


@dataclass
class TableSpec:
    """A whole `table:` node."""

    name: str
    """The experiment's name (`ewe_table3`)."""
    title: str
    """Heading of the rendered table."""
    columns: list
    """ColumnSpec entries."""
    rows: list
    """RowSpec entries: model rows first, reference rows marked `reference: true`."""
    claims: list = field(default_factory=list)
    """ClaimSpec entries: every claim sentence of the paper that maps onto this table."""
    notes: list = field(default_factory=list)
    """Caveats printed under the table, including claims that cannot be judged here and why. A number of this
    table is written `{=<row key>.<column>[:std|:n]}` (filled from the cells, so a re-run cannot leave it stale);
    a note quoting numbers from elsewhere is a mapping `{text, quoted_from}` naming where they come from
    (`note_text` prints the source after the text)."""
    data: str = ""
    """One line naming the data and, on the quick profile, the stand-in."""
    judge_claims: bool = True
    """False when this profile's data cannot carry the paper's claims at all (then `no_judge_reason`)."""
    no_judge_reason: str = ""
    """Why the claims are not judged on this profile."""
    not_run: dict = field(default_factory=dict)
    """`{column: reason}`: columns this profile does not run, with the measured reason (e.g. BLEU where no offline
    test set lets a model learn). Their cells render "not run" whatever the runs recorded, claims on them render
    "not run" with the reason, and the reason is printed under the table; the other columns of the same runs
    (FLOPs, parameters) are kept."""

    @classmethod
    def parse(cls, raw: dict) -> TableSpec:
        """Check every key of a raw `table:` node and return the typed spec (one UserError line on a typo)."""
        where = f"table `{raw.get('name', '?')}`"
        spec = _build(cls, normalised(raw), where)
        spec.columns = [_build(ColumnSpec, c, f"{where} column") for c in spec.columns]
        spec.rows = [_build(RowSpec, r, f"{where} row") for r in spec.rows]
        spec.claims = [_build(ClaimSpec, c, f"{where} claim") for c in spec.claims]
        for note in spec.notes:
            _check_note(note, where)
        spec.check()
        return spec

    def check(self) -> None:
        columns = {c.name for c in self.columns}
        rows = {r.key: r for r in self.rows}
        for column in self.columns:
            for role in ("floor", "ceiling"):
                key = getattr(column, role)
                if key and (key not in rows or not rows[key].reference):
                    raise UserError(f"table `{self.name}` column {column.name!r}: {role} {key!r} is not a reference "
                                    f"row (reference rows: {', '.join(k for k, r in rows.items() if r.reference)})")
            if column.better not in ("higher", "lower"):
                raise UserError(f"table `{self.name}` column {column.name!r}: better must be higher or lower")
        for name, reason in self.not_run.items():
            if name not in columns or not str(reason or "").strip():
                raise UserError(f"table `{self.name}` not_run: {name!r} must be a column ({', '.join(sorted(columns))}) "
                                f"with a non-empty reason")
        for row in self.rows:
            if row.role and row.role not in ROLES:
                raise UserError(f"table `{self.name}` row {row.key!r}: role must be one of {', '.join(ROLES)}")
            for old, new in row.floors.items():
                if any(key not in rows or not rows[key].reference for key in (old, new)):
                    raise UserError(f"table `{self.name}` row {row.key!r}: floors maps {old!r} to {new!r}; both must "
                                    f"be reference rows ({', '.join(k for k, r in rows.items() if r.reference)})")
        for claim in self.claims:
            if claim.op not in OPS:
                raise UserError(f"table `{self.name}` claim {claim.text!r}: op {claim.op!r} is not one of {', '.join(OPS)}")
            for side in (claim.a, claim.b):
                if side and (side[0] not in rows or side[1] not in columns):
                    raise UserError(f"table `{self.name}` claim {claim.text!r}: no cell {side} (rows: "
                                    f"{', '.join(rows)}; columns: {', '.join(sorted(columns))})")
            if claim.op == "equiv" and claim.margin is None:
                raise UserError(f"table `{self.name}` claim {claim.text!r}: op equiv needs a `margin`")
            if claim.op == "stabler" and not claim.b:
                raise UserError(f"table `{self.name}` claim {claim.text!r}: op stabler needs `b`")
            if not claim.b and claim.value is None:
                raise UserError(f"table `{self.name}` claim {claim.text!r}: needs `b` or `value`")

    def role(self, row: RowSpec, column: ColumnSpec) -> str | None:
        """A reference row's role in a column: floor, ceiling or comparator; None for a model row."""
        if not row.reference:
            return None
        if column.floor == row.key or any(self.floor_of(r, column) == row.key for r in self.rows if not r.reference):
            return "floor"
        if column.ceiling == row.key:
            return "ceiling"
        return row.role or "comparator"

    def floor_of(self, row: RowSpec, column: ColumnSpec) -> str:
        """The reference row a model row is judged against in a column: the column's floor, or the row's own."""
        return row.floors.get(column.floor, column.floor) if column.floor else ""

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def normalised(raw: dict) -> dict:
    """The `table:` node with `columns`, `rows`, `claims` and `notes` as lists, whichever form the files wrote them in.

    A mapping keyed by id becomes its values in insertion order (the experiment's entries, then those an overlay
    adds); a null value removes that entry (an overlay dropping a claim), a null field the field (a stand-in profile
    dropping a row's paper numbers). A row's id is its `key` and a column's its `name`, unless the entry names
    one. A list stays as it is.
    """
    out = dict(raw)
    for name, id_field in KEYED.items():
        entries = raw.get(name)
        if not isinstance(entries, dict):
            continue
        if name == "claims":
            entries = _sources_resolved(entries, raw.get("sources") or {}, raw.get("name", "?"))
        kept = [(id_, _without_nulls(value)) for id_, value in entries.items() if value is not None]
        out[name] = [({id_field: id_, **value} if id_field and isinstance(value, dict) and id_field not in value
                      else value) for id_, value in kept]
    out.pop("sources", None)
    judged = out.pop("claim_columns", None)
    if judged is not None or any(isinstance(c, dict) and "columns" in c for c in out.get("claims") or []):
        out["claims"] = _per_column(out.get("claims") or [], [c.get("name") for c in out.get("columns") or []],
                                    judged, raw.get("name", "?"))
    return out


def _without_nulls(entry: Any) -> Any:
    """An entry without its null fields: an overlay's `paper: null` removes the experiment's value."""
    return {k: v for k, v in entry.items() if v is not None} if isinstance(entry, dict) else entry


def _sources_resolved(claims: dict, sources: dict, table: str) -> dict:
    """Keyed claims with `source_of: <id>` given that source.

    The source is an entry of the table's `sources` (a quoted sentence several claims rest on, written once; it stays
    when a profile drops some of them) or another claim's `source`.
    """
    out = {}
    for id_, claim in claims.items():
        if isinstance(claim, dict) and "source_of" in claim:
            ref = claim["source_of"]
            other = claims.get(ref)
            source = sources.get(ref) or (other.get("source") if isinstance(other, dict) else None)
            if not source:
                raise UserError(f"table `{table}` claim {id_!r}: source_of {ref!r} names no entry of `sources` "
                                f"({', '.join(sources) or 'none'}) and no claim with a source "
                                f"({', '.join(k for k, v in claims.items() if v)})")
            claim = {**{k: v for k, v in claim.items() if k != "source_of"}, "source": source}
        out[id_] = claim
    return out


def _per_column(claims: list, columns: list[str], judged: list[str] | None, table: str) -> list:
    """Each claim with `columns` once per column (of those in `claim_columns`, when the profile names them).

    Its text is prefixed with the column's name ("AG News: LEAM is better than ..."), or names it where it says
    `{column}` ("{column} (topic): ..."), and `a` / `b` name a row only: the column is the one it is repeated for.
    """
    for name in judged or []:
        if name not in columns:
            raise UserError(f"table `{table}` claim_columns: {name!r} is not a column ({', '.join(columns)})")
    out = []
    for claim in claims:
        if not isinstance(claim, dict) or "columns" not in claim:
            out.append(claim)
            continue
        over = columns if claim["columns"] == "all" else list(claim["columns"])
        for column in over:
            if judged is not None and column not in judged:
                continue
            one = {k: v for k, v in claim.items() if k != "columns"}
            text = claim["text"]
            one["text"] = text.replace("{column}", column) if "{column}" in text else f"{column}: {text}"
            for side in ("a", "b"):
                if claim.get(side):
                    row = claim[side]
                    if not isinstance(row, str):
                        raise UserError(f"table `{table}` claim {claim['text']!r}: with `columns`, {side} names a row "
                                        f"only (got {row!r})")
                    one[side] = [row, column]
            out.append(one)
    return out


NOTE_KEYS = ("text", "quoted_from")


def _check_note(note: Any, where: str) -> None:
    if isinstance(note, str):
        return
    if not isinstance(note, dict) or set(note) != set(NOTE_KEYS) or not all(
            isinstance(note[k], str) and note[k].strip() for k in NOTE_KEYS):
        raise UserError(f"{where} note {note!r}: write a string, or a mapping with exactly `text` and `quoted_from` "
                        "(where its numbers come from: the paper's section, METHODS.md §, another run or table)")


def note_text(note: str | dict) -> str:
    """A note as printed: a quoted note's text followed by its source, so the reader sees where a number is from."""
    if isinstance(note, str):
        return note
    return f"{note['text'].rstrip()} (quoted from {note['quoted_from'].strip().rstrip('.')}.)"


def _build(kind: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a mapping, got {raw!r}")
    known = {f.name for f in fields(kind)}
    for key in raw:
        if key not in known:
            match = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {match[0]}?)" if match else f" (keys: {', '.join(sorted(known))})"
            raise UserError(f"{where} {raw.get('name') or raw.get('key') or raw.get('text', '')!r}: unknown key "
                            f"{key!r}{hint}")
    missing = [f.name for f in fields(kind)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in raw]
    if missing:
        raise UserError(f"{where} {raw.get('name') or raw.get('key') or ''!r}: missing {', '.join(missing)}")
    return kind(**{k: v for k, v in raw.items() if v is not None or k in ("value", "tol", "margin", "deterministic")})
