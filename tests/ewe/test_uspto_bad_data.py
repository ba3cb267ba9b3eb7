"""The USPTO export and its reader on bad inputs: no CPC codes, no route to BigQuery (the stated timeout),
binary claims.
"""

from __future__ import annotations

import json
import sys

import pytest

from cases import out, records
from conftest import fails_with

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


def test_u12_an_export_without_cpc_codes_says_so(tmp_path, capfd, monkeypatch):
    import pyarrow.parquet as pq

    from langrepr.data.patents.files import write_manifest, write_shard
    from langrepr.data.patents.synthetic import generate

    export = tmp_path / "u_nocpc"
    generate(export, n_train=40, n_test=10, n_subclasses=4, seed=1, shard_rows=32)
    manifest = json.loads((export / "manifest.json").read_text())
    for shard in manifest["shards"]:
        rows = pq.read_table(export / shard["file"]).to_pylist()
        for row in rows:
            row["cpc"] = []
        shard.update(write_shard(export / shard["file"], rows))
    write_manifest(export, manifest)
    line = fails_with(capfd, ["dataset=uspto", "model=bert_ewe", "debug=smoke", f"dataset.datamodule.data_dir={export}",
                              *out(tmp_path)])
    assert line.startswith(f"USPTO export {export}: none of the ") and line.endswith(
        "training documents has a CPC code (every cpc list is empty), so there is nothing to classify: the export "
        "lost its cpc column; re-export (`python -m langrepr.data.patents.export export ...`) or point "
        "LANGREPR_USPTO_DIR at a complete export")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


# ---------------------------------------------------------------- 4. the BigQuery export: a stated timeout, binary claims

def _stub_bigquery(monkeypatch, query) -> dict:
    """Fake google.cloud.bigquery / google.auth (no network, no real library): `query` is the client's query()."""
    import types

    bigquery, seen = types.ModuleType("google.cloud.bigquery"), {}

    class Retry:
        def __init__(self, deadline=600.0):
            self.deadline = deadline

        def with_deadline(self, deadline):
            return Retry(deadline)

    bigquery.DEFAULT_RETRY, bigquery.DEFAULT_JOB_RETRY = Retry(), Retry()
    bigquery.ScalarQueryParameter = bigquery.ArrayQueryParameter = lambda *args: args
    bigquery.QueryJobConfig = lambda **kw: kw
    bigquery.Client = lambda **kw: types.SimpleNamespace(query=query)
    errors = types.ModuleType("google.auth.exceptions")
    errors.DefaultCredentialsError = type("DefaultCredentialsError", (Exception,), {})
    auth = types.ModuleType("google.auth")
    auth.default = lambda scopes=None: (object(), "p")
    for name, mod in {"google.cloud.bigquery": bigquery, "google.auth": auth, "google.auth.exceptions": errors}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    return seen


def test_export_with_no_route_stops_at_the_stated_timeout(tmp_path, monkeypatch, capsys):   # e13
    import threading
    import time

    from langrepr.data.patents.export import main

    release, seen = threading.Event(), {}

    def query(sql, job_config=None, retry=None, timeout=None, job_retry=None):
        seen.update(retry=retry.deadline, job_retry=job_retry.deadline, timeout=timeout)
        release.wait(30)                       # the client retrying against a network with no route

    _stub_bigquery(monkeypatch, query)
    started = time.monotonic()
    try:
        code = main(["export", "--out", str(tmp_path / "out"), "--project", "p", "--timeout", "0.5"])
    finally:
        release.set()
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 2 and took < 5, took
    assert err.splitlines() == ["error: could not reach BigQuery within 0.5 s (--timeout; CallTimedOut): check the "
                                "network or proxy to bigquery.googleapis.com, or raise --timeout; then rerun (the "
                                "export resumes)"]
    assert seen == {"retry": 0.5, "job_retry": 0.5, "timeout": 0.5}   # the client is told the same limit
    assert not list((tmp_path / "out").glob("*.parquet"))


def test_export_timeout_default_and_the_clients_own_deadline(tmp_path, monkeypatch, capsys):
    from langrepr.data.patents.export import DEFAULT_TIMEOUT_S, main, parse_args

    assert parse_args(["export", "--out", "x"]).timeout_s == DEFAULT_TIMEOUT_S == 60

    class RetryError(Exception):
        pass

    def query(sql, job_config=None, retry=None, timeout=None):
        raise RetryError("Deadline of 60.0s exceeded while calling target function")

    _stub_bigquery(monkeypatch, query)
    assert main(["export", "--out", str(tmp_path), "--project", "p"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: could not reach BigQuery within 60 s (--timeout; RetryError): check the network or proxy to "
        "bigquery.googleapis.com, or raise --timeout; then rerun (the export resumes)"]
    assert main(["export", "--out", str(tmp_path), "--project", "p", "--timeout", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == ["error: --timeout 0.0: pass a positive number of seconds "
                                                    "(default 60)"]


def test_export_rows_wait_for_the_job_and_fetch_pages_within_the_timeout(monkeypatch):
    import types

    import langrepr.data.patents.export as export

    monkeypatch.setattr(export, "POLL_S", 0.0)
    _stub_bigquery(monkeypatch, lambda *a, **k: None)
    backend = export.BigQueryBackend("p", timeout_s=2)
    polls, asked = iter([False, False, True]), {}

    def result(start_index=None, page_size=None, timeout=None, retry=None):
        asked.update(start_index=start_index, page_size=page_size, timeout=timeout)
        return types.SimpleNamespace(pages=iter([[{"n": 1}, {"n": 2}], [{"n": 3}]]))

    job = types.SimpleNamespace(done=lambda retry=None, timeout=None: next(polls), result=result)
    assert [r["n"] for r in backend.rows(job, 7)] == [1, 2, 3]
    assert asked == {"start_index": 7, "page_size": 10_000, "timeout": 2.0}


def _binary_claims_backend(claims):
    import types

    rows = [{"publication_number": f"US-{8000000 + i}-B2", "kind_code": "B2", "publication_date": 20120304,
             "filing_date": 20100101, "split": "train", "cpc": [{"code": "G06Q10/08", "first": True}],
             "claims_localized": [{"text": f"1. A widget number {i}.", "language": "en"}]} for i in range(5)]
    rows[3]["claims_localized"] = [{"text": claims, "language": "en"}]

    class Backend:
        def dry_run(self, sql, params):
            return 10

        def run(self, sql, params, maximum_bytes_billed):
            return types.SimpleNamespace(job_id="job-1")

        def rows(self, job, start_index):
            yield from rows[start_index:]

    return Backend()


def test_binary_claims_in_an_export_name_the_row(tmp_path, capsys):
    from langrepr.data.patents.export import main

    code = main(["export", "--out", str(tmp_path), "--project", "p", "--shard-rows", "2"],
                backend=_binary_claims_backend(b"\xff\xfe1. A widget \x80"))
    out, err = capsys.readouterr()
    assert code == 2 and err.splitlines() == [
        "error: result row 3 (US-8000003-B2): its claims text is binary data, not UTF-8 (byte 0): "
        "claims_localized.text must be STRING, as in patents-public-data.patents.publications; check --table "
        "patents-public-data.patents.publications (the shards before this row are kept)"]
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["train-00000.parquet"]   # rows 0-1 kept: resumable
    assert not (tmp_path / "manifest.json").exists()


def test_utf8_bytes_claims_are_decoded(tmp_path):
    import pyarrow.parquet as pq

    from langrepr.data.patents.export import ExportConfig, export

    export(ExportConfig(out=str(tmp_path), project="p"), backend=_binary_claims_backend("1. Ein Gerät.".encode()),
           echo=lambda *_: None)
    claims = pq.read_table(tmp_path / "train-00000.parquet").column("claims").to_pylist()
    assert claims[3] == "1. Ein Gerät."


def test_binary_claims_in_an_export_are_text_or_one_line(tmp_path):
    """u13 reading side: a parquet whose claims column is binary decodes as UTF-8, or stops with one line."""
    from langrepr.data.patents.uspto import claims_text
    from langrepr.errors import UserError
    assert claims_text(b"1. A widget.", tmp_path, "train", 3) == "1. A widget."
    with pytest.raises(UserError, match=r"split train, row 7: the claims are bytes that are not UTF-8"):
        claims_text(b"\xff\xfe1. A", tmp_path, "train", 7)
    with pytest.raises(UserError, match="holds NoneType, not text"):
        claims_text(None, tmp_path, "train", 8)
