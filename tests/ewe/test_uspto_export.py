"""BigQuery export with a fake client: parquet + manifest, cost guard, credentials, resume, parameters."""

import json
import re
import subprocess
import sys
import types

import pyarrow.parquet as pq
import pytest

from langrepr.data.patents import export as uspto_export
from langrepr.data.patents.export import ExportConfig, build_query, export, main
from langrepr.data.patents.files import read_manifest, sha256_file
from langrepr.data.patents.labels import document_labels
from langrepr.errors import UserError


def schema_row(i: int, split: str) -> dict:
    """A result row shaped like patents.publications (nested cpc and claims_localized records)."""
    claims = "\n".join(f"{k}. The widget of claim {max(1, k - 1)} number {i}." for k in range(1, 24))
    return {"publication_number": f"US-{8000000 + i}-B2", "kind_code": "B2",
            "publication_date": {"train": 20120304, "2015A": 20150210, "2015B": 20150911}[split],
            "filing_date": 20100101, "split": split,
            "claims_localized": [{"text": "Revendications", "language": "fr"}, {"text": claims, "language": "en"}],
            "cpc": [{"code": "A01B1/00", "first": False, "inventive": False, "tree": []},
                    {"code": "G06Q10/08", "first": True, "inventive": True, "tree": []},
                    {"code": "A01B3/12", "first": False, "inventive": False, "tree": []}]}


class FakeBackend:
    """Stands in for BigQueryBackend; records what the export sends."""

    def __init__(self, n=(5, 3, 4), estimate=10 * 2**30, fail_after=None):
        self.rows_ = ([schema_row(i, "2015A") for i in range(n[1])] + [schema_row(100 + i, "2015B") for i in range(n[2])]
                      + [schema_row(200 + i, "train") for i in range(n[0])])
        self.rows_.insert(2, {**schema_row(999, "2015A"), "claims_localized": []})   # no English claims
        self.estimate, self.fail_after = estimate, fail_after
        self.calls, self.start_indices = [], []

    def dry_run(self, sql, params):
        self.calls.append(("dry_run", sql, params))
        return self.estimate

    def run(self, sql, params, maximum_bytes_billed):
        self.calls.append(("run", sql, params, maximum_bytes_billed))
        return types.SimpleNamespace(job_id="job-1")

    def rows(self, job, start_index):
        self.start_indices.append(start_index)
        for k, row in enumerate(self.rows_[start_index:], start_index):
            if self.fail_after is not None and k >= self.fail_after:
                raise ConnectionError("network dropped")
            yield row


def test_export_writes_parquet_and_manifest(tmp_path):
    backend = FakeBackend()
    path = export(ExportConfig(out=str(tmp_path), shard_rows=2, project="p"), backend=backend, echo=lambda *_: None)
    manifest = read_manifest(tmp_path)
    assert path == tmp_path / "manifest.json" and manifest["synthetic"] is False
    assert manifest["rows"] == {"train": 5, "2015A": 3, "2015B": 4} and manifest["skipped_rows_this_run"] == 1
    assert manifest["query"] == build_query() and manifest["dry_run_bytes"] == 10 * 2**30
    assert [s["file"] for s in manifest["shards"]][:3] == ["2015A-00000.parquet", "2015A-00001.parquet",
                                                          "2015B-00000.parquet"]
    for s in manifest["shards"]:
        assert sha256_file(tmp_path / s["file"]) == s["sha256"]
    rows = pq.read_table(tmp_path / "train-00000.parquet").to_pylist()
    assert rows[0]["cpc"][1] == {"code": "G06Q10/08", "first": True, "inventive": True}
    assert document_labels(rows[0]["cpc"]) == ["First-G06Q", "Later-A01B"]
    assert rows[0]["claims"].endswith("20. The widget of claim 19 number 200.")          # claims 21+ cut
    assert rows[0]["synthetic"] is False
    assert export(ExportConfig(out=str(tmp_path), shard_rows=2), backend=FakeBackend(), echo=lambda *_: None)
    # second run: the manifest matches, nothing is queried


def test_query_parameters_not_literals():
    sql = build_query()
    assert not re.search(r"\d{8}|\b(19|20)\d\d\b|'B[12]'|'US'|'en'", sql)
    params = dict((n, v) for n, _, v in uspto_export.query_parameters(ExportConfig(out="x", limit=7)))
    assert params["train_start"] == 20060101 and params["test_b_end"] == 20151231
    assert params["kind_codes"] == ["B1", "B2"] and params["limit_per_split"] == 7
    for name in params:
        assert f"@{name}" in sql
    with pytest.raises(UserError):
        build_query("x`; DROP TABLE y; --")


def test_cost_guard(tmp_path):
    cheap = ExportConfig(out=str(tmp_path), max_bytes_billed=2**30)
    backend = FakeBackend(estimate=5 * 2**40)
    lines = []
    with pytest.raises(UserError, match="above --max-bytes-billed.*--allow-expensive"):
        export(cheap, backend=backend, echo=lines.append)
    assert "$31.25" in lines[0] and [c[0] for c in backend.calls] == ["dry_run"]   # never ran
    assert main(["export", "--out", str(tmp_path), "--max-bytes-billed", "1000"], backend=FakeBackend()) == 2
    cheap.allow_expensive = True
    export(cheap, backend=backend, echo=lines.append)
    run = [c for c in backend.calls if c[0] == "run"][0]
    assert run[3] >= 5 * 2**40 and run[2] == backend.calls[0][2]                 # same parameters


def test_resume_skips_written_shards(tmp_path):
    cfg = ExportConfig(out=str(tmp_path), shard_rows=2)
    with pytest.raises(ConnectionError):
        export(cfg, backend=FakeBackend(fail_after=7), echo=lambda *_: None)
    state = json.loads((tmp_path / ".export_state.json").read_text())
    written = {s["file"]: s["sha256"] for s in state["shards"]}
    assert len(written) == 3 and read_manifest(tmp_path) is None
    backend = FakeBackend()
    export(cfg, backend=backend, echo=lambda *_: None)
    assert backend.start_indices == [state["shards"][-1]["end"]]
    manifest = read_manifest(tmp_path)
    assert {s["file"]: s["sha256"] for s in manifest["shards"][:3]} == written
    assert manifest["rows"] == {"train": 5, "2015A": 3, "2015B": 4}
    fresh = tmp_path / "fresh"
    export(ExportConfig(out=str(fresh), shard_rows=2), backend=FakeBackend(), echo=lambda *_: None)
    assert [s["sha256"] for s in read_manifest(fresh)["shards"]] == [s["sha256"] for s in manifest["shards"]]


def _stub_google(monkeypatch, credentials_ok: bool):
    """Fake google.cloud.bigquery / google.auth modules (the real library is not installed here)."""
    bigquery = types.ModuleType("google.cloud.bigquery")
    made = {}

    class Param:
        def __init__(self, *args):
            self.args = args

    bigquery.ScalarQueryParameter = type("ScalarQueryParameter", (Param,), {})
    bigquery.ArrayQueryParameter = type("ArrayQueryParameter", (Param,), {})
    bigquery.QueryJobConfig = lambda **kw: kw
    bigquery.Client = lambda **kw: made.setdefault("client", types.SimpleNamespace(
        query=lambda sql, job_config: made.setdefault("config", job_config) and types.SimpleNamespace(
            total_bytes_processed=123)))
    errors = types.ModuleType("google.auth.exceptions")
    errors.DefaultCredentialsError = type("DefaultCredentialsError", (Exception,), {})
    auth = types.ModuleType("google.auth")

    def default(scopes=None):
        if not credentials_ok:
            raise errors.DefaultCredentialsError("Could not automatically determine credentials")
        return object(), "p"

    auth.default = default
    for name, mod in {"google.cloud.bigquery": bigquery, "google.auth": auth, "google.auth.exceptions": errors}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return made


def test_missing_project_and_credentials_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    assert main(["export", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--project" in err and "GOOGLE_CLOUD_PROJECT" in err
    _stub_google(monkeypatch, credentials_ok=False)
    assert main(["export", "--out", str(tmp_path), "--project", "p"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GOOGLE_APPLICATION_CREDENTIALS" in err and "gcloud auth" in err
    assert "Traceback" not in err


def test_real_backend_passes_query_parameters(monkeypatch):
    made = _stub_google(monkeypatch, credentials_ok=True)
    backend = uspto_export.BigQueryBackend("p")
    params = uspto_export.query_parameters(ExportConfig(out="x"))
    assert backend.dry_run(build_query(), params) == 123
    sent = made["config"]["query_parameters"]
    assert made["config"]["dry_run"] is True and len(sent) == len(params)
    assert {type(p).__name__ for p in sent} == {"ScalarQueryParameter", "ArrayQueryParameter"}
    assert ("train_start", "INT64", 20060101) in [p.args for p in sent]


def test_cli_subprocess_no_traceback(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(uspto_export.Path(uspto_export.__file__).parents[3])}
    proc = subprocess.run([sys.executable, "-m", "langrepr.data.patents.uspto", "export", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "GOOGLE_CLOUD_PROJECT" in proc.stderr
