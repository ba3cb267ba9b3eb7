"""Notes that cannot go stale: a result-like number in a table note is a placeholder or a sourced quotation.

A note that quotes its own table's cells writes `{=<row key>.<column>}` (filled at render time, so a re-run
cannot leave it contradicting the table); a note quoting the paper, METHODS.md, another run or another table is
a mapping `{text, quoted_from}` naming the source. This test reads every note of every experiment file and
profile overlay (every note that can reach a rendered table is written in one of them) and fails on a decimal
number or a ratio (87.68, 0.035, 2.0x, 158x) that is neither. Section references (§6.1, Section 6.2) and arXiv
ids are not results. Reading the files, not composing them, keeps the test to a second.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from langrepr.confpaths import CONF_DIR
from langrepr.errors import UserError
from langrepr.table_spec import TableSpec
from langrepr.tables.markdown import to_markdown
from langrepr.tables.spec import PLACEHOLDER, filled_notes

RESULT_NUMBER = re.compile(r"(?<![\w.])(?:\d[\d,]*(?:\.\d+)?x\b|\d[\d,]*\.\d+)")   # 2.0x, 158x, 87.68, 0.035
NOT_A_RESULT = re.compile(r"(?:§\s*|\bSections?\s+|\barXiv:?\s*)\d+(?:\.\d+)*")  # §6.1, Section 6.2, arXiv 2311.11012

NOTE_FILES = sorted(CONF_DIR.glob("papers/*/experiment/*.yaml")) + sorted(CONF_DIR.glob("papers/*/experiment_profile/*.yaml"))


def unsourced_numbers(note: str | dict) -> list[str]:
    """The result-like numbers of a note that come neither from a placeholder nor from a named source."""
    if isinstance(note, dict):
        return []   # {text, quoted_from}: TableSpec.parse checks that the source is there
    return RESULT_NUMBER.findall(NOT_A_RESULT.sub("", PLACEHOLDER.sub("", note)))


def file_notes(path: Path) -> list[tuple[str, str | dict]]:
    """`(id, note)` for each note of the file's `table:` node, keyed or listed."""
    notes = ((yaml.safe_load(path.read_text()) or {}).get("table") or {}).get("notes") or {}
    entries = notes.items() if isinstance(notes, dict) else enumerate(notes)
    return [(str(id_), note) for id_, note in entries if note is not None]


def test_the_scan_reads_the_notes_of_every_paper():
    papers = {path.parts[-3] for path in NOTE_FILES if file_notes(path)}
    assert papers >= {"bitcipher", "ewe", "leam", "multihot", "tensorcoder"}


@pytest.mark.parametrize("path", NOTE_FILES, ids=lambda p: p.stem)
def test_no_note_carries_an_unsourced_number(path):
    bad = [f"{id_}: {numbers} in {note[:100]!r}" for id_, note in file_notes(path)
           if (numbers := unsourced_numbers(note))]
    assert not bad, (f"{path.relative_to(CONF_DIR)}: a number of this table is written {{=<row key>.<column>}}; one "
                     "from elsewhere goes in a note {text: ..., quoted_from: <source>}:\n" + "\n".join(bad))


@pytest.mark.parametrize("path", NOTE_FILES, ids=lambda p: p.stem)
def test_every_quoted_note_names_its_source(path):
    for _, note in file_notes(path):
        TableSpec.parse({"name": path.stem, "title": "T", "columns": [{"name": "Acc"}], "rows": [{"key": "A"}],
                         "notes": [note]})


def test_the_check_tells_a_placeholder_a_section_and_a_quotation_from_a_bare_number():
    assert unsourced_numbers("LEAM {=LEAM.AG News} beats SWEM (§4.2, Section 6.1, arXiv 2311.11012)") == []
    assert unsourced_numbers("LEAM 87.68 is 2.0x SWEM's time, 158x slower") == ["87.68", "2.0x", "158x"]
    assert unsourced_numbers({"text": "the paper's 92.45", "quoted_from": "the paper, Table 2"}) == []


SPEC = {"name": "toy", "title": "Toy", "rows": [{"key": "A"}, {"key": "B", "ratio_base": "A"}],
        "columns": [{"name": "Time", "fmt": "{:.1f}"}, {"name": "Time ratio", "ratio_of": "Time"},
                    {"name": "Per step", "quotient": ["Time", "Steps"]}, {"name": "Steps"}]}


def cell(ours):
    return {"ours": ours, "paper": None, "std": None, "n": 1}


def test_a_quoted_note_prints_its_source_and_a_malformed_one_is_one_line():
    rows = [{"key": "A", "cells": {"Time": cell(2.04)}}]
    notes = filled_notes(["A took {=A.Time} s", {"text": "The paper's A took 9.9 s.", "quoted_from": "the paper, Table 4"}],
                         rows, SPEC)
    assert notes == ["A took 2.0 s", "The paper's A took 9.9 s. (quoted from the paper, Table 4.)"]
    with pytest.raises(UserError, match="quoted_from"):
        TableSpec.parse({**SPEC, "notes": [{"text": "A took 9.9 s"}]})


def test_derived_columns_are_marked_in_the_header_and_say_how_they_are_computed():
    table = {"title": "Toy", "profile": "quick", "seeds": [1], "commit": "abc", "columns": [c["name"] for c in SPEC["columns"]],
             "rows": [{"key": k, "cells": {c["name"]: cell(1.0) for c in SPEC["columns"]}} for k in ("A", "B")],
             "claims": [], "notes": []}
    md = to_markdown(table, SPEC)
    assert "| | Time | Time ratio † | Per step † | Steps |" in md
    assert "† derived from other cells, not measured: Time ratio = each row's Time / its ratio-base row's (A); " \
           "Per step = Time / Steps of the same row." in md


def papers_with_placeholders() -> list[str]:
    """Experiments one of whose files (experiment or overlay) writes a placeholder: only they can name a lost cell."""
    names = {p.stem for p in CONF_DIR.glob("papers/*/experiment/*.yaml")}
    marked = {p.stem.rsplit("_", 1)[0] if p.parent.name == "experiment_profile" else p.stem
              for p in NOTE_FILES if "{=" in p.read_text()}
    return sorted(names & marked)


@pytest.mark.parametrize("profile", ["quick", "full"])
@pytest.mark.parametrize("table", papers_with_placeholders())
def test_every_placeholder_names_a_cell_of_its_own_profiles_table(table, profile):
    """`make tables` (full) stopped at Bit Cipher Table 2: a note in the experiment file quoted a quick-only row.
    A note quoting rows that one profile lacks belongs in that profile's overlay."""
    from langrepr.tables.runs import experiment_config
    from langrepr.tables.spec import table_spec

    spec = table_spec(experiment_config(table, profile), table)
    rows = [{"key": r["key"], "cells": {c["name"]: {} for c in spec["columns"]}} for r in spec["rows"]]
    texts = [n if isinstance(n, str) else n["text"] for n in spec.get("notes", [])]
    filled_notes(texts, rows, spec)      # a placeholder naming no cell of this profile's table raises
