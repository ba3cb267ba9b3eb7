"""One-off export of US patents from Google Patents Public Data (BigQuery) to local parquet.

The EWE paper (arXiv 2302.13475 §5.1) trains on US utility grants published 2006-2014 and tests
on 2015A (Jan-Jun 2015) and 2015B (Jul-Dec 2015). This module is the only code in langrepr that
imports ``google.cloud.bigquery`` (lazily, in `BigQueryBackend`); training reads the parquet.

Safety: the query is dry-run first and its bytes and on-demand cost are printed; above
``--max-bytes-billed`` it refuses unless ``--allow-expensive`` (the limit is also set on the job,
so BigQuery itself enforces it). All dates, codes and limits are query parameters; the SQL is
constant text. Resumable: rows come ordered by (split, publication_number) and every shard
records the result-row range it holds, so a rerun continues at the first missing row (BigQuery
serves an identical query from its 24 h result cache at no cost).

Every call to BigQuery is bounded by ``--timeout`` seconds (default 60): the client's own timeout and retry
deadline are set to it, and the call itself is abandoned when it has not answered by then, so a machine with
credentials but no route to Google stops with one line naming the setting instead of retrying silently for
many minutes. Waiting for a long query to finish is not bounded: each poll of its status is.

Usage: ``python -m langrepr.data.patents.export export --project P --out DIR`` (equivalently
``python -m langrepr.data.patents.uspto export ...``).

The query and what it exports (`ExportConfig`) live in ``langrepr.data.patents.export_query`` (re-exported here).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from langrepr.data.patents.export_query import (  # noqa: F401
    DEFAULT_TIMEOUT_S,
    QUERY,
    TABLE,
    TIB,
    ExportConfig,
    build_query,
    query_parameters,
)
from langrepr.data.patents.files import (
    FORMAT,
    first_claims_text,
    read_manifest,
    shards_intact,
    split_counts,
    write_manifest,
    write_shard,
)
from langrepr.errors import UserError

STATE = ".export_state.json"
POLL_S = 5.0               # between two polls of a running query's status

class Backend(Protocol):
    """What the export needs from BigQuery; tests pass a fake with the same three methods."""

    def dry_run(self, sql: str, params: list[tuple[str, str, Any]]) -> int: ...
    def run(self, sql: str, params: list[tuple[str, str, Any]], maximum_bytes_billed: int) -> Any: ...
    def rows(self, job: Any, start_index: int) -> Iterable[Mapping[str, Any]]: ...


class CallTimedOut(TimeoutError):
    """A BigQuery call that did not answer within --timeout (abandoned in its thread)."""


def within(seconds: float, fn, *args, **kwargs):
    """fn(*args, **kwargs), abandoned after `seconds`: the client's retry loop cannot outlast the deadline.

    The call runs in a daemon thread, so an abandoned call never keeps the process alive.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
            outcome["error"] = err

    worker = threading.Thread(target=target, name="bigquery-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CallTimedOut(f"no answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _parameter_names(fn) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):   # builtins such as next()
        return set()


def check_key_file(path: str | None) -> None:
    """A set GOOGLE_APPLICATION_CREDENTIALS must name a readable JSON key; say which problem it has."""
    if not path:
        return
    key = Path(path)
    if not key.is_file():
        raise UserError(f"GOOGLE_APPLICATION_CREDENTIALS={path}: no such file; point it at your service-account key "
                        "JSON, or unset it and run `gcloud auth application-default login`")
    try:
        content = json.loads(key.read_text())
    except (OSError, ValueError):
        raise UserError(f"GOOGLE_APPLICATION_CREDENTIALS={path} is not a JSON key file (damaged or the wrong file): "
                        "download the key again from the Cloud console") from None
    if not isinstance(content, dict) or "type" not in content:
        raise UserError(f"GOOGLE_APPLICATION_CREDENTIALS={path} is JSON but not a Google credentials file (no "
                        "\"type\" field): download the service-account key again")


def _is_network_error(err: Exception) -> bool:
    """Connection refused, DNS failure, timeouts, retries exhausted: anything that means 'no route'."""
    import concurrent.futures

    names = {type(e).__name__ for e in (err, err.__cause__, err.__context__) if e is not None}
    return bool(names & {"ConnectionError", "ConnectTimeout", "ReadTimeout", "Timeout", "TransportError",
                         "RetryError", "DeadlineExceeded", "ServiceUnavailable", "CallTimedOut"}) or isinstance(
        err, (concurrent.futures.TimeoutError, TimeoutError, ConnectionError))


class BigQueryBackend:
    """The real client; raises UserError (one line) when the project, library or credentials are missing."""

    def __init__(self, project: str | None, timeout_s: float = DEFAULT_TIMEOUT_S):
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise UserError(f"--timeout {timeout_s}: pass a positive number of seconds (default {DEFAULT_TIMEOUT_S:g})")
        self.timeout_s = float(timeout_s)
        project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise UserError("no Google Cloud project: pass --project P or set GOOGLE_CLOUD_PROJECT "
                            "(that project is billed for the query)")
        check_key_file(os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"))
        try:
            bigquery = importlib.import_module("google.cloud.bigquery")
            google_auth = importlib.import_module("google.auth")
            auth_errors = importlib.import_module("google.auth.exceptions")
        except ImportError:
            raise UserError("google-cloud-bigquery is not installed: pip install 'langrepr[bigquery]'") from None
        try:
            credentials, _ = google_auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        except auth_errors.DefaultCredentialsError as err:
            if os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):   # set and readable, yet refused: say why
                raise UserError(f"GOOGLE_APPLICATION_CREDENTIALS={os.environ['GOOGLE_APPLICATION_CREDENTIALS']} was "
                                f"refused ({' '.join(str(err).split())[:160]}): download a fresh key") from None
            raise UserError("no Google Cloud credentials: run `gcloud auth application-default login` or set "
                            "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file") from None
        self.bq = bigquery
        self.client = bigquery.Client(project=project, credentials=credentials)

    def _params(self, params: list[tuple[str, str, Any]]) -> list[Any]:
        return [self.bq.ArrayQueryParameter(n, t, v) if isinstance(v, list) else self.bq.ScalarQueryParameter(n, t, v)
                for n, t, v in params]

    def _call(self, fn, *args, **kwargs):
        """Call fn with the client's timeout and retry deadline set to --timeout; abandon it past that."""
        names = _parameter_names(fn)
        if "timeout" in names:               # google-cloud-bigquery's query(), result() and done() take both
            kwargs["timeout"] = self.timeout_s
        for name, default in (("retry", "DEFAULT_RETRY"), ("job_retry", "DEFAULT_JOB_RETRY")):
            policy = getattr(self.bq, default, None)
            if name in names and hasattr(policy, "with_deadline"):
                kwargs[name] = policy.with_deadline(self.timeout_s)
        try:
            # a little grace, so that the client's own deadline (a clearer error) fires first where it works
            return within(self.timeout_s + min(5.0, self.timeout_s / 10), fn, *args, **kwargs)
        except Exception as e:   # google.api_core errors carry a one-line .message; keep it that way
            if _is_network_error(e):
                raise UserError(f"could not reach BigQuery within {self.timeout_s:g} s (--timeout; {type(e).__name__}): "
                                "check the network or proxy to bigquery.googleapis.com, or raise --timeout; then "
                                "rerun (the export resumes)") from None
            message = getattr(e, "message", None)
            if message is None:
                raise
            raise UserError(f"BigQuery: {' '.join(str(message).split())}") from None

    def dry_run(self, sql: str, params: list[tuple[str, str, Any]]) -> int:
        cfg = self.bq.QueryJobConfig(dry_run=True, use_query_cache=False, query_parameters=self._params(params))
        return int(self._call(self.client.query, sql, job_config=cfg).total_bytes_processed)

    def run(self, sql: str, params: list[tuple[str, str, Any]], maximum_bytes_billed: int) -> Any:
        cfg = self.bq.QueryJobConfig(query_parameters=self._params(params), maximum_bytes_billed=maximum_bytes_billed)
        return self._call(self.client.query, sql, job_config=cfg)

    def rows(self, job: Any, start_index: int) -> Iterable[Mapping[str, Any]]:
        """The result rows from `start_index`: the query is waited for poll by poll, each page fetched in --timeout."""
        while not self._call(job.done):
            time.sleep(POLL_S)
        pages = iter(self._call(job.result, start_index=start_index or None, page_size=10_000).pages)
        end = object()
        while (page := self._call(next, pages, end)) is not end:
            yield from page


def _claims_text(text: Any, row: Mapping[str, Any], position: int, table: str) -> str:
    """Claims as str: UTF-8 bytes are decoded; anything else is one line naming the result row."""
    if isinstance(text, str):
        return text
    where = f"result row {position} ({row.get('publication_number', '?')})"
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            return bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise UserError(f"{where}: its claims text is binary data, not UTF-8 (byte {err.start}): "
                            f"claims_localized.text must be STRING, as in {TABLE}; check --table {table} (the shards "
                            "before this row are kept)") from None
    raise UserError(f"{where}: its claims text is a {type(text).__name__}, not text: claims_localized.text must be "
                    f"STRING, as in {TABLE}; check --table {table} (the shards before this row are kept)")


def _record(row: Mapping[str, Any], language: str, position: int = 0, table: str = TABLE) -> dict[str, Any] | None:
    """One parquet record from a result row (None when it has no claims in ``language``)."""
    text = next((c["text"] for c in (row["claims_localized"] or [])
                 if c.get("language") == language and c.get("text")), None)
    if text is None or not row["cpc"]:
        return None
    text = _claims_text(text, row, position, table)
    return {"publication_number": row["publication_number"], "kind_code": row["kind_code"],
            "publication_date": int(row["publication_date"]), "filing_date": int(row["filing_date"] or 0),
            "split": row["split"], "claims": first_claims_text(text),
            "cpc": [{"code": c["code"], "first": bool(c.get("first")), "inventive": bool(c.get("inventive"))}
                    for c in row["cpc"]],
            "synthetic": False}


def _write_state(out: Path, state: dict[str, Any]) -> None:
    tmp = out / f"{STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, out / STATE)


def export(cfg: ExportConfig, backend: Backend | None = None, echo=print) -> Path:
    """Run the export into ``cfg.out`` (resuming when possible); returns the manifest path."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    sql, params = build_query(cfg.table), query_parameters(cfg)
    fingerprint = hashlib.sha256((sql + json.dumps(params)).encode()).hexdigest()[:16]
    done = read_manifest(out)
    if done is not None and done.get("fingerprint") == fingerprint and shards_intact(out, done["shards"]):
        echo(f"already exported: {out / 'manifest.json'}")
        return out / "manifest.json"

    shards: list[dict[str, Any]] = []
    state_path = out / STATE
    if state_path.is_file():
        state = json.loads(state_path.read_text())
        if state.get("fingerprint") == fingerprint:
            for s in state["shards"]:                  # keep the intact prefix only
                if not shards_intact(out, [s]):
                    break
                shards.append(s)
    offset = shards[-1]["end"] if shards else 0

    backend = backend or BigQueryBackend(cfg.project, cfg.timeout_s)
    estimate = int(backend.dry_run(sql, params))
    cost = estimate / TIB * cfg.price_per_tib
    echo(f"dry run: {estimate:,} bytes ({estimate / 2**30:,.1f} GiB) ~ ${cost:,.2f} at ${cfg.price_per_tib}/TiB "
         f"on demand (limit {cfg.max_bytes_billed:,} bytes)")
    if estimate > cfg.max_bytes_billed and not cfg.allow_expensive:
        raise UserError(f"query would process {estimate / 2**30:,.1f} GiB (~${cost:,.2f}), above --max-bytes-billed "
                        f"{cfg.max_bytes_billed:,}: rerun with --allow-expensive or a higher --max-bytes-billed")
    limit = max(cfg.max_bytes_billed, int(estimate * 1.1) + 1) if cfg.allow_expensive else cfg.max_bytes_billed
    if offset:
        echo(f"resuming after {len(shards)} shards ({offset:,} result rows)")
    (out / "manifest.json").unlink(missing_ok=True)   # an older, different export must not describe new shards
    t0 = time.time()
    job = backend.run(sql, params, limit)
    state = {"fingerprint": fingerprint, "job_id": getattr(job, "job_id", None), "shards": shards}
    skipped = 0

    def flush(buffer: list[dict], end: int) -> None:
        split = buffer[0]["split"]
        k = sum(1 for s in shards if s["split"] == split)
        entry = write_shard(out / f"{split}-{k:05d}.parquet", buffer)
        entry.update(start=shards[-1]["end"] if shards else 0, end=end)
        shards.append(entry)
        _write_state(out, state)
        echo(f"  wrote {entry['file']} ({entry['rows']:,} rows)")

    buffer: list[dict] = []
    position = offset
    for row in backend.rows(job, offset):
        record = _record(row, cfg.language, position, cfg.table)
        if record is None:
            skipped += 1
        elif buffer and (record["split"] != buffer[0]["split"] or len(buffer) >= cfg.shard_rows):
            flush(buffer, position)
            buffer = [record]
        else:
            buffer.append(record)
        position += 1
    if buffer:
        flush(buffer, position)

    manifest = {"format": FORMAT, "synthetic": False, "source": cfg.table, "fingerprint": fingerprint,
                "query": sql, "parameters": {n: v for n, _, v in params}, "config": asdict(cfg),
                "dry_run_bytes": estimate, "estimated_cost_usd": round(cost, 4), "job_id": state["job_id"],
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": round(time.time() - t0, 1),
                "rows": split_counts(shards), "skipped_rows_this_run": skipped, "shards": shards}
    path = write_manifest(out, manifest)
    echo(f"exported {sum(manifest['rows'].values()):,} patents {manifest['rows']} to {out}")
    return path


def parse_args(argv: list[str]) -> ExportConfig:
    """CLI arguments -> ExportConfig (``export`` subcommand)."""
    p = argparse.ArgumentParser(prog="python -m langrepr.data.patents.export", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="run the BigQuery export into --out")
    e.add_argument("--project", default=None, help="billed GCP project (default: $GOOGLE_CLOUD_PROJECT)")
    e.add_argument("--out", required=True, help="output folder (parquet shards + manifest.json)")
    e.add_argument("--max-bytes-billed", type=int, default=TIB, help="refuse above this many bytes (default 1 TiB)")
    e.add_argument("--allow-expensive", action="store_true", help="run even above --max-bytes-billed")
    e.add_argument("--limit", type=int, default=0, help="rows per split (0 = all; bytes billed are the same)")
    e.add_argument("--price-per-tib", type=float, default=6.25, help="on-demand USD per TiB, for the estimate")
    e.add_argument("--shard-rows", type=int, default=50_000)
    e.add_argument("--table", default=TABLE)
    e.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds any one BigQuery call may take, retries included (default {DEFAULT_TIMEOUT_S:g})")
    a = p.parse_args(argv)
    return ExportConfig(out=a.out, project=a.project, max_bytes_billed=a.max_bytes_billed,
                        allow_expensive=a.allow_expensive, limit=a.limit, price_per_tib=a.price_per_tib,
                        shard_rows=a.shard_rows, table=a.table, timeout_s=a.timeout)


def main(argv: list[str] | None = None, backend: Backend | None = None) -> int:
    """Entry point: UserError -> one line on stderr, exit 2, no traceback."""
    try:
        export(parse_args(list(sys.argv[1:] if argv is None else argv)), backend=backend)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
