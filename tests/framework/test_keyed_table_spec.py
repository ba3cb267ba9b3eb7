"""`columns`, `rows`, `claims` and `notes` of a `table:` node keyed by id, so that an overlay states only what differs."""

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


TWO = [{"name": "Yahoo", "metric": "test/acc"}, {"name": "AG News", "metric": "test/acc"}]
ROWS = {"LEAM": {"match": {"model": "leam"}}, "SWEM": {"match": {"model": "swem"}},
        "BoW": {"match": {"model": "bow"}, "reference": True}}


def test_a_claim_with_columns_is_the_sentence_said_of_each_column():
    raw = {"name": "t", "title": "T", "columns": TWO, "rows": ROWS, "claims": {
        "bow": {"text": "LEAM beats BoW", "a": "LEAM", "op": "gt", "b": "BoW", "columns": "all", "source": "§2 'all'"},
        "swem": {"text": "SWEM beats BoW", "a": "SWEM", "op": "gt", "b": "BoW", "columns": ["AG News"],
                 "source_of": "bow"}}}
    claims = TableSpec.parse(raw).claims
    assert [(c.text, c.a, c.b, c.source) for c in claims] == [
        ("Yahoo: LEAM beats BoW", ["LEAM", "Yahoo"], ["BoW", "Yahoo"], "§2 'all'"),
        ("AG News: LEAM beats BoW", ["LEAM", "AG News"], ["BoW", "AG News"], "§2 'all'"),
        ("AG News: SWEM beats BoW", ["SWEM", "AG News"], ["BoW", "AG News"], "§2 'all'")]


def test_a_claim_naming_its_column_says_it_where_it_says_so():
    raw = {"name": "t", "title": "T", "columns": TWO, "rows": ROWS, "claims": {
        "topic": {"text": "{column} (topic): LEAM beats BoW", "a": "LEAM", "op": "gt", "b": "BoW", "columns": "all"}}}
    assert [c.text for c in TableSpec.parse(raw).claims] == ["Yahoo (topic): LEAM beats BoW",
                                                             "AG News (topic): LEAM beats BoW"]


def test_columns_keyed_by_name_and_a_table_built_on_another_states_what_differs():
    """TensorCoder Table 3 is Table 2's table with its own paper size, cited rows, wording and numbers."""
    raw = {"name": "t", "title": "T", "columns": {"BLEU": {"metric": "test/bleu"}, "Extra": None,
                                                  "GFLOPs": {"metric": "m/g", "match": {"size": "iwslt16"}}}}
    assert normalised(raw)["columns"] == [{"name": "BLEU", "metric": "test/bleu"},
                                          {"name": "GFLOPs", "metric": "m/g", "match": {"size": "iwslt16"}}]
    from langrepr.tables import experiment_config, table_spec

    two = table_spec(experiment_config("tensorcoder_table2", "full"), "tensorcoder_table2")
    three = table_spec(experiment_config("tensorcoder_table3", "full"), "tensorcoder_table3")
    paper_size = {s["name"]: s["match"] for s in (two["columns"][3], three["columns"][3])}
    assert paper_size == {"GFLOPs at paper size": {"paper_size": "iwslt16"}}            # Table 3's own size
    assert two["columns"][3]["match"] == {"paper_size": "wmt16"}
    assert [r["key"] for r in three["rows"]][:4] == ["NAT-FT (Gu 2018)", "imitate NAT (Wei 2019)",
                                                     "Iterative Refinement NAT (Lee 2018)", "Transformer-1head"]
    assert "Tensorized Transformer" in [r["key"] for r in two["rows"]]
    by_op = {(c["op"], c.get("value")): c for c in three["claims"]}
    assert by_op[("ratio_ge", 3.0)]["text"].startswith("IWSLT16: the FLOPs of TensorCoder only is 1/3")
    assert all(c["source"].startswith(("Abstract / Table 3", "§5.2 / Table 3")) for c in three["claims"])
    assert [(c["a"], c["op"], c["b"]) for c in two["claims"]] == [(c["a"], c["op"], c["b"]) for c in three["claims"]]


def test_claim_columns_keep_a_profiles_columns_and_a_wrong_name_is_one_line():
    raw = {"name": "t", "title": "T", "columns": TWO, "rows": ROWS, "claim_columns": ["AG News"], "claims": {
        "bow": {"text": "LEAM beats BoW", "a": "LEAM", "op": "gt", "b": "BoW", "columns": "all", "source": "s"},
        "cell": {"text": "Yahoo: SWEM beats BoW", "a": ["SWEM", "Yahoo"], "op": "gt", "b": ["BoW", "Yahoo"]}}}
    assert [c.text for c in TableSpec.parse(raw).claims] == ["AG News: LEAM beats BoW", "Yahoo: SWEM beats BoW"]
    with pytest.raises(UserError, match="claim_columns: 'AG' is not a column"):
        TableSpec.parse({**raw, "claim_columns": ["AG"]})
    with pytest.raises(UserError, match="source_of 'nope' names no entry of `sources`"):
        TableSpec.parse({**raw, "claims": {"x": {"text": "t", "a": "LEAM", "op": "gt", "b": "BoW", "columns": "all",
                                                 "source_of": "nope"}}})
    with pytest.raises(UserError, match="with `columns`, a names a row only"):
        TableSpec.parse({**raw, "claims": {"x": {"text": "t", "a": ["LEAM", "Yahoo"], "op": "gt", "b": "BoW",
                                                 "columns": "all"}}})


def test_leam_table2_says_each_claim_once_and_keeps_its_70_lines_and_its_quick_order():
    """Issue 34: the 70 claim lines of LEAM Table 2 from 17 entries; the quick table (AG News) in its committed order."""
    import json

    import yaml

    from langrepr.confpaths import CONF_DIR
    from langrepr.tables import experiment_config, table_spec

    entries = yaml.safe_load((CONF_DIR / "papers/leam/tables/leam_table2.yaml").read_text())["claims"]
    assert len([e for e in entries.values() if e]) == 17
    assert len(table_spec(experiment_config("leam_table2", "full"), "leam_table2")["claims"]) == 70
    quick = [c["text"] for c in table_spec(experiment_config("leam_table2", "quick"), "leam_table2")["claims"]]
    committed = json.loads((CONF_DIR.parent / "outputs/tables/leam_table2.quick.json").read_text())["claims"]
    assert quick == [c["text"] for c in committed]


def test_a_shared_source_stays_when_a_profile_drops_the_claim_that_quoted_it():
    raw = {"name": "t", "title": "T", "columns": TWO, "rows": ROWS, "sources": {"s4": "§4 'Cat wins'"}, "claims": {
        "yahoo": None,
        "ag": {"text": "AG: LEAM beats BoW", "a": ["LEAM", "AG News"], "op": "gt", "b": ["BoW", "AG News"],
               "source_of": "s4"}}}
    assert [c.source for c in TableSpec.parse(raw).claims] == ["§4 'Cat wins'"]
