"""On-disk format shared by the USPTO export and the synthetic patent generator.

Both writers produce the same thing so that one datamodule reads either: a folder of parquet
shards ``<split>-<k>.parquet`` (split in ``train``, ``2015A``, ``2015B``) plus ``manifest.json``
listing every shard with its row count and sha256. The manifest is the unit of identity: its
digest keys the tokenized-tensor cache, and the ``synthetic`` flag travels from it into every
run record. Claims are stored as the original text of the first 20 claims (numbering kept) and
are split again in Python when read, because the claim numbering is the only structure the
Google Patents text has.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FORMAT = "langrepr-uspto-v1"
SPLITS = ("train", "2015A", "2015B")
MANIFEST = "manifest.json"
MAX_CLAIMS = 20

CPC_TYPE = pa.list_(pa.struct([("code", pa.string()), ("first", pa.bool_()), ("inventive", pa.bool_())]))
SCHEMA = pa.schema([
    ("publication_number", pa.string()),
    ("kind_code", pa.string()),
    ("publication_date", pa.int64()),   # YYYYMMDD integer, as in BigQuery
    ("filing_date", pa.int64()),
    ("split", pa.string()),
    ("claims", pa.string()),            # text of claims 1..20, original numbering kept
    ("cpc", CPC_TYPE),                  # in source array order; `first` marks the primary code
    ("synthetic", pa.bool_()),          # True for generated data, so it is labelled everywhere
])

# A claim starts at a line start with "N." or "N ." (METHODS 1.6). The fallback accepts a
# number after a sentence end, for texts that run all claims together on one line.
_CLAIM_START = re.compile(r"(?:^|\n)\s*(\d{1,3})\s?\.\s")
_CLAIM_START_INLINE = re.compile(r"(?:^|(?<=[\s:.;]))(\d{1,3})\s?\.\s+(?=\S)")


def _claim_starts(text: str) -> list[tuple[int, int, int]]:
    """(number, marker_start, body_start) of each claim; numbers must run 1, 2, 3, ...

    The sequence rule keeps "step 3. " inside a claim from starting a claim; cancelled claims
    ("2. (canceled)") keep their number and so keep the count right.
    """
    starts: list[tuple[int, int, int]] = []
    for pattern in (_CLAIM_START, _CLAIM_START_INLINE):
        starts = []
        for m in pattern.finditer(text):
            if int(m.group(1)) == len(starts) + 1:
                starts.append((len(starts) + 1, m.start(1), m.end()))
        if len(starts) >= 2:
            break
    return starts


def claim_spans(text: str) -> list[tuple[int, int, int]]:
    """(number, body_start, body_end) of each claim, in order ([] when text is unnumbered)."""
    starts = _claim_starts(text)
    ends = [marker for _, marker, _ in starts[1:]] + [len(text)]
    return [(n, body, end) for (n, _, body), end in zip(starts, ends)]


def first_claims_text(text: str, max_claims: int = MAX_CLAIMS) -> str:
    """The original text up to the marker of claim ``max_claims + 1`` (all of it if shorter)."""
    starts = _claim_starts(text)
    if len(starts) <= max_claims:
        return text
    return text[: starts[max_claims][1]].rstrip()


def join_claims(text: str, max_claims: int = MAX_CLAIMS) -> str:
    """Claims 1..max_claims without their numbers, whitespace-normalised, joined by one space.

    Unnumbered text (no claim 1 found) is kept whole, so a format surprise costs accuracy,
    not data.
    """
    spans = claim_spans(text)
    if not spans:
        return " ".join(text.split())
    return " ".join(" ".join(text[a:b].split()) for n, a, b in spans if n <= max_claims)


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_shard(path: str | Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Write records as one parquet shard atomically; returns its manifest entry."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)
    return {"file": path.name, "split": records[0]["split"] if records else None,
            "rows": len(records), "sha256": sha256_file(path)}


def write_manifest(out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    """Write manifest.json last and atomically: its presence means the folder is complete."""
    path = Path(out_dir) / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def read_manifest(data_dir: str | Path) -> dict[str, Any] | None:
    """The manifest, or None when the folder has none (not exported, or interrupted)."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def shards_intact(data_dir: str | Path, shards: Iterable[dict[str, Any]]) -> bool:
    """True when every listed shard exists with the recorded sha256."""
    data_dir = Path(data_dir)
    return all((data_dir / s["file"]).is_file() and sha256_file(data_dir / s["file"]) == s["sha256"]
               for s in shards)


def manifest_digest(manifest: dict[str, Any]) -> str:
    """Short content hash of an export (shard hashes only), for cache keys."""
    h = hashlib.sha256()
    for s in sorted(manifest["shards"], key=lambda s: s["file"]):
        h.update(f"{s['file']}:{s['sha256']}\n".encode())
    return h.hexdigest()[:16]


def split_counts(shards: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Rows per split from manifest shard entries (every split present, possibly 0)."""
    counts = {s: 0 for s in SPLITS}
    for s in shards:
        counts[s["split"]] = counts.get(s["split"], 0) + s["rows"]
    return counts
