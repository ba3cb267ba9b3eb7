"""The export's BigQuery SQL runs for real: transpiled with sqlglot, executed by DuckDB over a local
`publications` table in the documented schema (nested `cpc` and `claims_localized` records), through the
real `export()` pipeline. Kind-code, date-window, language, claim-cut and First-flag logic are checked row
by row, so a query edit that breaks one of them fails here (the fake-client tests never execute the SQL).
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from langrepr.data.patents.export import ExportConfig, build_query, export
from langrepr.data.patents.labels import document_labels

duckdb = pytest.importorskip("duckdb")
sqlglot = pytest.importorskip("sqlglot")

# patents-public-data.patents.publications, the columns the query reads (types as documented)
SCHEMA = """
CREATE TABLE publications (
  publication_number VARCHAR, country_code VARCHAR, kind_code VARCHAR,
  publication_date BIGINT, filing_date BIGINT,
  claims_localized STRUCT(text VARCHAR, language VARCHAR, truncated BOOLEAN)[],
  cpc STRUCT(code VARCHAR, inventive BOOLEAN, "first" BOOLEAN, tree VARCHAR[])[]
)"""


def claims(n: int, tag: str) -> str:
    return "\n".join(f"{k}. The device of claim {max(1, k - 1)} ({tag})." for k in range(1, n + 1))


def cpc(*codes: tuple[str, bool]) -> list[dict]:
    return [{"code": c, "inventive": f, "first": f, "tree": []} for c, f in codes]


EN = [{"text": claims(3, "en"), "language": "en", "truncated": False}]
TWO = cpc(("H04L9/32", False), ("G06F21/00", True))
# (publication_number, country, kind, date, claims_localized, cpc, expected split or None = excluded, why)
ROWS = [
    ("US-1-B2", "US", "B2", 20100505, EN, TWO, "train", "grant in the training window"),
    ("US-2-B1", "US", "B1", 20150302, EN, TWO, "2015A", "B1 grant, first half of 2015"),
    ("US-3-B2", "US", "B2", 20150909, EN, TWO, "2015B", "second half of 2015"),
    ("US-4-A1", "US", "A1", 20100505, EN, TWO, None, "application, not a grant"),
    ("EP-5-B1", "EP", "B1", 20100505, EN, TWO, None, "not a US publication"),
    ("US-6-B2", "US", "B2", 20051231, EN, TWO, None, "before the training window"),
    ("US-7-B2", "US", "B2", 20160101, EN, TWO, None, "after 2015B"),
    ("US-8-B2", "US", "B2", 20100505, [{"text": claims(3, "de"), "language": "de", "truncated": False}], TWO,
     None, "no English claims"),
    ("US-9-B2", "US", "B2", 20100505, EN, [], None, "no CPC codes"),
    ("US-10-B2", "US", "B2", 20141231, EN, TWO, "train", "last day of the training window"),
    ("US-11-B2", "US", "B2", 20150101, EN, TWO, "2015A", "first day of 2015A"),
    ("US-12-B2", "US", "B2", 20150630, EN, TWO, "2015A", "last day of 2015A"),
    ("US-13-B2", "US", "B2", 20150701, EN, TWO, "2015B", "first day of 2015B"),
    ("US-14-B2", "US", "B2", 20100505,
     [{"text": "Ansprüche", "language": "de", "truncated": False}, *EN], TWO, "train", "English kept beside German"),
    ("US-15-B2", "US", "B2", 20100505, [{"text": claims(25, "long"), "language": "en", "truncated": False}],
     cpc(("A61K31/00", False), ("C07D401/00", False), ("A61P35/00", True)), "train", "claims cut before 21"),
]


class DuckDBBackend:
    """The export's Backend protocol over DuckDB: the exact query text, transpiled, with real parameters."""

    def __init__(self, con):
        self.con, self.sql = con, None

    def _duck(self, sql: str) -> str:
        return sqlglot.transpile(sql, read="bigquery", write="duckdb")[0]

    def dry_run(self, sql, params):
        self._duck(sql)                      # parses: an invalid edit fails here like a BigQuery dry run would
        return 1024

    def run(self, sql, params, maximum_bytes_billed):
        self.sql = self._duck(sql)
        return {n: v for n, _, v in params}

    def rows(self, job, start_index):
        cur = self.con.execute(self.sql, job)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()][start_index:]


@pytest.fixture
def publications():
    con = duckdb.connect()
    con.execute(SCHEMA)
    con.executemany("INSERT INTO publications VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(num, country, kind, date, date - 20000, cl, cp) for num, country, kind, date, cl, cp, _, _ in ROWS])
    return con


def exported(tmp_path, con, **overrides) -> dict[str, dict]:
    cfg = ExportConfig(out=str(tmp_path / "export"), table="publications", shard_rows=4, **overrides)
    export(cfg, backend=DuckDBBackend(con), echo=lambda *_: None)
    rows = {}
    for path in sorted((tmp_path / "export").glob("*.parquet")):
        rows.update({r["publication_number"]: r for r in pq.read_table(path).to_pylist()})
    return rows


def test_query_selects_kind_country_dates_language_row_by_row(tmp_path, publications):
    rows = exported(tmp_path, publications)
    for num, _country, kind, date, _cl, _cp, split, why in ROWS:
        if split is None:
            assert num not in rows, f"{num} should be excluded: {why}"
        else:
            assert num in rows, f"{num} missing: {why}"
            assert rows[num]["split"] == split, (num, why)
            assert rows[num]["kind_code"] == kind and rows[num]["publication_date"] == date


def test_claims_are_english_and_cut_before_claim_21(tmp_path, publications):
    rows = exported(tmp_path, publications)
    assert rows["US-14-B2"]["claims"] == claims(3, "en")             # the German record is not taken
    long = rows["US-15-B2"]["claims"]
    assert long.endswith("20. The device of claim 19 (long).") and "21." not in long


def test_cpc_order_and_first_flag_survive_to_the_labels(tmp_path, publications):
    rows = exported(tmp_path, publications)
    codes = rows["US-15-B2"]["cpc"]
    assert [c["code"] for c in codes] == ["A61K31/00", "C07D401/00", "A61P35/00"]   # source array order
    assert [c["first"] for c in codes] == [False, False, True]
    assert document_labels(codes, "first_later") == ["First-A61P", "Later-A61K", "Later-C07D"]
    assert document_labels(rows["US-1-B2"]["cpc"], "first_later") == ["First-G06F", "Later-H04L"]


def test_limit_per_split_keeps_the_first_publication_numbers(tmp_path, publications):
    rows = exported(tmp_path, publications, limit=1)
    assert sorted((r["split"], n) for n, r in rows.items()) == [("2015A", "US-11-B2"), ("2015B", "US-13-B2"),
                                                                ("train", "US-1-B2")]


def test_a_broken_query_edit_is_caught(publications):
    sql = build_query("publications").replace("AND kind_code IN UNNEST(@kind_codes)", "")
    backend = DuckDBBackend(publications)
    params = {"train_start": 20060101, "train_end": 20141231, "test_a_start": 20150101, "test_a_end": 20150630,
              "test_b_start": 20150701, "test_b_end": 20151231, "language": "en", "country": "US",
              "limit_per_split": 0}
    backend.run(sql, [], 0)
    got = {r["publication_number"] for r in backend.rows(params, 0)}
    assert "US-4-A1" in got          # without the kind filter an application slips in: the row check above sees it
