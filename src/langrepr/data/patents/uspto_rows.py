"""Reading an export's rows for `PatentDataModule`: the data folder, its manifest, claims text, subsamples, encoded splits."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch
from torch.utils.data import Dataset

from langrepr.data.integrity import read_manifest_checked
from langrepr.errors import UserError

log = logging.getLogger("langrepr.data.patents.uspto")


ENV_DIR = "LANGREPR_USPTO_DIR"
TEST_SPLITS = ["2015A", "2015B"]
_CACHE_VERSION = 1
_ENCODE_CHUNK = 2048


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """The export folder: the argument, else $LANGREPR_USPTO_DIR; UserError when absent."""
    value = str(data_dir) if data_dir else os.environ.get(ENV_DIR, "")
    path = Path(value) if value else None
    if path is None or not path.is_dir():
        raise UserError(f"USPTO export not found at {path or '(unset)'}: run `python -m langrepr.data.patents.uspto "
                        f"export ...` or set {ENV_DIR} / dataset.datamodule.data_dir")
    return path


def load_manifest(data_dir: Path) -> dict[str, Any]:
    """The export's manifest; UserError when the folder holds no finished export."""
    manifest = read_manifest_checked(data_dir)   # a damaged manifest.json: one line naming it
    if manifest is None:
        raise UserError(f"no manifest.json in {data_dir}: the export is missing or unfinished; rerun "
                        f"`python -m langrepr.data.patents.uspto export ...` (it resumes) or point {ENV_DIR} elsewhere")
    return manifest


def _iter_rows(data_dir: Path, manifest: dict, split: str, column: str, rows: np.ndarray) -> Iterator[Any]:
    """Values of ``column`` at the sorted row indices ``rows`` of a split, streamed in batches.

    Streaming keeps memory flat: the full export's claims are ~17 GB as Python strings.
    """
    pos, k = 0, 0
    for shard in manifest["shards"]:
        if shard["split"] != split or k >= len(rows):
            continue
        for batch in pq.ParquetFile(data_dir / shard["file"]).iter_batches(batch_size=4096, columns=[column]):
            values, stop = batch.column(0), int(np.searchsorted(rows, pos + batch.num_rows))
            for g in rows[k:stop]:
                yield values[int(g) - pos].as_py()
            k, pos = stop, pos + batch.num_rows


def claims_text(value: Any, data_dir: Path, split: str, row: int) -> str:
    """A claims cell as text: a binary column (an export written as bytes) is decoded as UTF-8, or one clear line."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as err:
            raise UserError(f"{data_dir}: split {split}, row {row}: the claims are bytes that are not UTF-8 "
                            f"({err.reason} at byte {err.start}); re-export them as text") from None
    if not isinstance(value, str):
        raise UserError(f"{data_dir}: split {split}, row {row}: the claims column holds {type(value).__name__}, not "
                        "text; re-export it") from None
    return value


def _select(n: int, limit: int | None, seed: int, salt: int) -> np.ndarray:
    """A deterministic random subset of range(n) of size min(n, limit), in seeded order."""
    perm = np.random.default_rng([seed, salt]).permutation(n)
    return perm if limit is None else perm[:limit]


def check_test_subsample(value: Any) -> dict[str, int]:
    """`test_subsample` as {split: n} ({} = off); one line naming the bad entry otherwise."""
    if not value:
        return {}
    try:
        items = dict(value).items()
    except (TypeError, ValueError):
        raise UserError(f"dataset.datamodule.test_subsample must be null or a mapping of {TEST_SPLITS} to a document "
                        f"count, got {value!r}") from None
    out = {}
    for split, n in items:
        if split not in TEST_SPLITS or isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UserError(f"dataset.datamodule.test_subsample: {split}: {n!r} is not a positive document count "
                            f"of a test half ({', '.join(TEST_SPLITS)})")
        out[str(split)] = int(n)
    return out


def subsample_rows(n_rows: int, size: int, seed: int, salt: int) -> np.ndarray:
    """`size` of a test half's `n_rows` row indices, drawn uniformly at random by (seed, salt); all when fewer."""
    if size > n_rows:
        log.warning("test_subsample asks for %d documents of a test half that has %d: scoring all of them",
                    size, n_rows)
    return np.random.default_rng([seed, 1000 + salt]).permutation(n_rows)[:size]


def _id_dtype(vocab_size: int) -> torch.dtype:
    """Smallest dtype for the ids (bytes fit uint8): the EWE cache is 8x smaller than int64."""
    for dtype in (torch.uint8, torch.int16, torch.int32):
        if vocab_size - 1 <= torch.iinfo(dtype).max:
            return dtype
    return torch.int64


class _EncodedSplit(Dataset):
    """Cached tensors of one split; ``self[list_of_indices]`` returns a whole batch.

    The gather runs in numpy: small torch CPU ops pay an intra-op thread wake-up (measured 7 ms
    per batch on 2 cores vs 0.03 ms in numpy), which would make the loader the bottleneck.
    """

    def __init__(self, tensors: dict[str, torch.Tensor], num_labels: int):
        self.arrays = {k: v.numpy() for k, v in tensors.items()}
        self.num_labels = num_labels

    def __len__(self) -> int:
        return int(self.arrays["input_ids"].shape[0])

    def __getitem__(self, idx: list[int]) -> dict[str, torch.Tensor]:
        a = self.arrays
        index = np.asarray(idx, dtype=np.int64)
        labels = np.zeros((len(index), self.num_labels), dtype=np.float32)
        off, cols = a["label_offsets"], a["label_index"]
        for row, i in enumerate(index):
            labels[row, cols[off[i]:off[i + 1]]] = 1.0
        return {"input_ids": torch.from_numpy(a["input_ids"][index].astype(np.int64)),
                "attention_mask": torch.from_numpy(a["attention_mask"][index].astype(np.int64)),
                "labels": torch.from_numpy(labels)}
