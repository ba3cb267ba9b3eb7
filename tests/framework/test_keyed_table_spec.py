"""`rows`, `claims` and `notes` of a `table:` node keyed by id, so that an overlay states only what differs."""

from __future__ import annotations

import pytest

from langrepr.errors import UserError
from langrepr.table_spec import TableSpec, normalised

COLUMNS = [{"name": "Acc", "metric": "test/acc"}]


def test_a_mapping_becomes_its_values_in_order_a_null_drops_one_and_a_row_id_is_its_key():
    raw = {"name": "t", "title": "T", "columns": COLUMNS,
           "rows": {"LEAM": {"match": {"model": "leam"}}, "gone": None,
                    "prior": {"key": "Label prior", "match": {"model": "prior"}, "reference": True}},
           "claims": {"beats": {"text": "LEAM beats the prior", "a": ["LEAM", "Acc"], "op": "gt",
                                "b": ["Label prior", "Acc"]}, "dropped": None},
           "notes": {"first": "one", "quick_only": None, "last": "two"}}
    spec = normalised(raw)
    assert [r["key"] for r in spec["rows"]] == ["LEAM", "Label prior"]       # a row naming its key keeps it
    assert [c["text"] for c in spec["claims"]] == ["LEAM beats the prior"]
    assert spec["notes"] == ["one", "two"]
    assert raw["rows"]["LEAM"] == {"match": {"model": "leam"}}               # the composed node is not changed
    parsed = TableSpec.parse(raw)
    assert [r.key for r in parsed.rows] == ["LEAM", "Label prior"] and parsed.notes == ["one", "two"]


def test_a_list_stays_a_list_and_a_typo_inside_a_keyed_entry_is_still_one_line():
    raw = {"name": "t", "title": "T", "columns": COLUMNS, "rows": [{"key": "A"}], "notes": ["n"]}
    assert normalised(raw) == raw
    with pytest.raises(UserError, match="unknown key 'mach'"):
        TableSpec.parse({**raw, "rows": {"A": {"mach": {}}}})


def test_a_keyed_overlay_changes_its_entries_only():
    """EWE Tables 3-5: ewe_quick.yaml fills the quick notes' places and drops the full-sample note; the
    experiment's other notes reach the quick table without being restated."""
    from langrepr.tables import experiment_config, table_spec

    full = table_spec(experiment_config("ewe_table4", "full"), "ewe_table4")["notes"]
    quick = table_spec(experiment_config("ewe_table4", "quick"), "ewe_table4")["notes"]
    assert quick[0].startswith("Quick scale") and full[0].startswith("Learning floor")
    assert not any(n.startswith("Full profile") for n in quick) and any(n.startswith("Full profile") for n in full)
    assert [n for n in full if not n.startswith("Full profile")] == quick[3:]
