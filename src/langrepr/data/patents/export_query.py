"""The export's query: constant SQL with @parameters, the table id check, and `ExportConfig` (the spending guard)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from langrepr.errors import UserError

TABLE = "patents-public-data.patents.publications"
TIB = 2 ** 40
DEFAULT_TIMEOUT_S = 60.0   # --timeout: the longest any one BigQuery call may take (retries included)

# Constant text: every value is an @parameter. Claims are cut before claim 21 in SQL only to
# shrink the download; Python re-splits (METHODS §1.6). `cpc` is selected raw, in array order,
# so relabeling happens in Python and the raw labeling stays possible.
QUERY = """\
WITH pubs AS (
  SELECT
    publication_number,
    kind_code,
    publication_date,
    filing_date,
    CASE
      WHEN publication_date BETWEEN @train_start AND @train_end THEN 'train'
      WHEN publication_date BETWEEN @test_a_start AND @test_a_end THEN '2015A'
      ELSE '2015B'
    END AS split,
    ARRAY(
      SELECT AS STRUCT IFNULL(REGEXP_EXTRACT(c.text, r'(?s)^(.*?)\\n\\s*21\\s?\\.\\s'), c.text) AS text, c.language
      FROM UNNEST(claims_localized) AS c
      WHERE c.language = @language
    ) AS claims_localized,
    ARRAY(
      SELECT AS STRUCT x.code, x.first, x.inventive
      FROM UNNEST(cpc) AS x WITH OFFSET AS off
      ORDER BY off
    ) AS cpc
  FROM `{table}`
  WHERE country_code = @country
    AND kind_code IN UNNEST(@kind_codes)
    AND (publication_date BETWEEN @train_start AND @train_end
         OR publication_date BETWEEN @test_a_start AND @test_a_end
         OR publication_date BETWEEN @test_b_start AND @test_b_end)
    AND EXISTS (SELECT 1 FROM UNNEST(claims_localized) AS c WHERE c.language = @language)
    AND ARRAY_LENGTH(cpc) > 0
)
SELECT * FROM pubs
WHERE TRUE
QUALIFY @limit_per_split <= 0
  OR ROW_NUMBER() OVER (PARTITION BY split ORDER BY publication_number) <= @limit_per_split
ORDER BY split, publication_number
"""


@dataclass
class ExportConfig:
    """What to export and the spending guard. Dates are YYYYMMDD integers (the table's format)."""

    out: str
    project: str | None = None
    max_bytes_billed: int = TIB                      # refuse above this (about $6.25 on demand)
    allow_expensive: bool = False
    limit: int = 0                                   # rows per split, 0 = all (does not cut bytes billed)
    price_per_tib: float = 6.25                      # on-demand USD per TiB scanned
    shard_rows: int = 50_000
    table: str = TABLE
    timeout_s: float = DEFAULT_TIMEOUT_S             # --timeout: any one BigQuery call, retries included
    language: str = "en"
    country: str = "US"
    kind_codes: list[str] = field(default_factory=lambda: ["B1", "B2"])   # utility grants
    train_start: int = 20060101
    train_end: int = 20141231
    test_a_start: int = 20150101
    test_a_end: int = 20150630
    test_b_start: int = 20150701
    test_b_end: int = 20151231


def build_query(table: str = TABLE) -> str:
    """The export SQL; the table name is the only substitution and must look like a table id."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", table):
        raise UserError(f"--table {table!r} is not a BigQuery table id like {TABLE}")
    return QUERY.format(table=table)


def query_parameters(cfg: ExportConfig) -> list[tuple[str, str, Any]]:
    """(name, BigQuery type, value) triples; a list value means an ARRAY parameter of that type."""
    ints = ("train_start", "train_end", "test_a_start", "test_a_end", "test_b_start", "test_b_end")
    params = [(name, "INT64", int(getattr(cfg, name))) for name in ints]
    params += [("language", "STRING", cfg.language), ("country", "STRING", cfg.country),
               ("kind_codes", "STRING", list(cfg.kind_codes)), ("limit_per_split", "INT64", int(cfg.limit))]
    return params
