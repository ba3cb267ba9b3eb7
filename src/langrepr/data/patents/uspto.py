"""USPTO patent classification data (EWE paper, arXiv 2302.13475 §5.1) from a local parquet export.

Reads the folder written by ``langrepr.data.patents.export`` (real patents) or
``langrepr.data.patents.synthetic`` (generated, flagged ``synthetic``); training never touches
BigQuery. Per document: claims 1-20 re-split in Python and joined with a space (input), the
CPC subclasses relabeled First-/Later- (target, ``patent_labels``). Splits: ``train`` minus a
deterministic ``val_fraction`` hold-out, and the two test sets 2015A, 2015B (paper §5.1).

Tokenization runs once: tensors are cached under ``cache_dir`` keyed by the tokenizer's
``cache_key()``, the export's shard hashes, the labeling and the sample limits, so a second run
(or every run of a sweep) only loads a file. Ids are stored in the smallest integer dtype and
labels as sparse index lists; batches are gathered whole (one index per batch), which keeps the
loader far from the training step's critical path.

CLI: ``python -m langrepr.data.patents.uspto export ...`` (the BigQuery export, see patents/export.py) and
``python -m langrepr.data.patents.uspto stats DIR`` (Table 2 statistics as JSON).

Reading the export's rows (data folder, manifest, claims, subsamples, the encoded split) lives in
``langrepr.data.patents.uspto_rows`` (re-exported here).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from langrepr.data import standin
from langrepr.data.integrity import check_documents, verify_manifest
from langrepr.data.loaders import SplitLoaders, batch_loader
from langrepr.data.patents.files import SPLITS, join_claims, manifest_digest, split_counts
from langrepr.data.patents.labels import LABELINGS, LabelVocabulary, table2_stats
from langrepr.data.patents.uspto_rows import (  # noqa: F401
    _CACHE_VERSION,
    _ENCODE_CHUNK,
    ENV_DIR,
    TEST_SPLITS,
    _EncodedSplit,
    _id_dtype,
    _iter_rows,
    _select,
    check_test_subsample,
    claims_text,
    load_manifest,
    resolve_data_dir,
    subsample_rows,
)
from langrepr.errors import UserError

log = logging.getLogger(__name__)


class PatentDataModule(SplitLoaders, pl.LightningDataModule):
    """Multi-label CPC subclass classification over a parquet export (real or synthetic).

    Args:
        data_dir: export folder with manifest.json; None/"" means $LANGREPR_USPTO_DIR.
        labeling: "first_later" (paper §5.3, 2 labels per subclass) or "raw" (plain subclasses).
        max_train_samples: cap on the train split (taken before the val hold-out), None = all.
        max_eval_samples: cap on val and on each test split, None = all.
        tokenizer: any object with the contract's prepare/encode/cache_key (injected by train.py).
        cache_dir: where tokenized tensors and the label vocabulary go; None = <data_dir>/cache.
        seed: picks the val hold-out and the sample subsets (not the model seed).
        val_fraction: share of the (capped) train split held out for validation.
        test_subsample: None (off: every document of each test half, the export's ~150k in all) or
            ``{split: n}``: score a seeded random ``n`` of that half instead. The EWE paper's Table 2 prints
            14.5k documents for 2015A and 15.4k for 2015B (the full profile's setting); it does not say how they
            were drawn [inferred: uniformly at random]. Applied before ``max_eval_samples``.
        test_subsample_seed: the subsample's seed, fixed across runs (not the model seed): every model and
            seed scores the same documents, as the paper's one test set.
    """

    val_split = "val"

    def __init__(self, data_dir: str | None = None, labeling: str = "first_later", batch_size: int = 32,
                 num_workers: int = 0, max_train_samples: int | None = None,
                 max_eval_samples: int | None = None, tokenizer: Any = None, cache_dir: str | None = None,
                 seed: int = 0, val_fraction: float = 0.05, test_subsample: dict[str, int] | None = None,
                 test_subsample_seed: int = 0):
        super().__init__()
        if labeling not in LABELINGS:
            raise UserError(f"labeling must be one of {list(LABELINGS)}, got {labeling!r}")
        if not 0.0 < val_fraction < 1.0:
            raise UserError(f"val_fraction must be in (0, 1), got {val_fraction}")
        if tokenizer is None:
            raise UserError("PatentDataModule needs a tokenizer: set model.tokenizer (train.py passes it in)")
        self.data_dir, self.labeling, self.tokenizer = data_dir, labeling, tokenizer
        self.batch_size, self.num_workers, self.seed = batch_size, num_workers, seed
        self.max_train_samples, self.max_eval_samples = max_train_samples, max_eval_samples
        self.cache_dir, self.val_fraction = cache_dir, val_fraction
        self.test_subsample = check_test_subsample(test_subsample)
        self.test_subsample_seed = test_subsample_seed
        self.test_splits: list[str] = list(TEST_SPLITS)
        self.label_vocab: LabelVocabulary | None = None
        self.data_info: dict[str, Any] = {}
        self.encode_stats: dict[str, float] = {}
        self._splits: dict[str, _EncodedSplit] = {}

    # --- what train.py reads ------------------------------------------------------------
    @property
    def net_kwargs(self) -> dict[str, int]:
        """Runtime values for the net constructor (the label count is only known after setup)."""
        if self.label_vocab is None:
            raise RuntimeError("PatentDataModule.net_kwargs is available after setup()")
        return {"num_labels": len(self.label_vocab)}

    @property
    def task_kwargs(self) -> dict[str, Any]:
        """The label count and the training labels' frequencies (a task may start its output bias there)."""
        train = self._splits["train"].arrays
        counts = np.bincount(train["label_index"].astype(np.int64), minlength=len(self.label_vocab))
        return {"num_labels": len(self.label_vocab),
                "label_prior": (counts / max(len(train["label_offsets"]) - 1, 1)).tolist()}

    def texts_and_labels(self, split: str) -> tuple[list[str], np.ndarray]:
        """The raw input texts and the (N, num_labels) 0/1 label matrix of a split, for reference rows."""
        self._build()
        manifest = load_manifest(self._dir)
        plan = self._plan(split_counts(manifest["shards"]))
        source = "train" if split == "val" else split
        texts = list(self._texts(manifest, source, plan[split]))
        t = self._splits[split].arrays
        y = np.zeros((len(texts), len(self.label_vocab)), dtype=np.int8)
        offsets, index = t["label_offsets"], t["label_index"]
        for i in range(len(texts)):
            y[i, index[offsets[i]:offsets[i + 1]]] = 1
        return texts, y

    def save_label_vocab(self, path: str | os.PathLike) -> Path:
        """Write the run's label columns (JSON) next to its other artefacts."""
        if self.label_vocab is None:
            raise RuntimeError("call setup() first")
        return self.label_vocab.save(path)

    def state_dict(self) -> dict[str, Any]:
        """Saved into every Lightning checkpoint, so a checkpoint knows its label columns."""
        if self.label_vocab is None:
            return {}
        return {"labeling": self.label_vocab.labeling, "labels": list(self.label_vocab.labels),
                "data_info": self.data_info}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Checks a resumed run sees the same label columns it was trained with."""
        if state and self.label_vocab is not None and list(self.label_vocab.labels) != state["labels"]:
            raise UserError("checkpoint label vocabulary differs from this export's: resume with the same "
                            "data_dir, labeling and max_train_samples")

    # --- Lightning hooks ------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Tokenize and cache once (idempotent; later calls and setup() just load)."""
        self._build()

    def setup(self, stage: str | None = None) -> None:
        self._build()

    def _plan(self, counts: dict[str, int]) -> dict[str, np.ndarray]:
        """Row indices (into each export split) that form train/val/2015A/2015B."""
        pool = _select(counts["train"], self.max_train_samples, self.seed, 0)
        n_val = int(round(self.val_fraction * len(pool))) if len(pool) > 1 else 0
        n_val = max(n_val, 1) if len(pool) > 1 else 0
        plan = {"train": np.sort(pool[n_val:]), "val": np.sort(pool[:n_val][: self.max_eval_samples])}
        for k, split in enumerate(TEST_SPLITS, 1):   # sorted = file order, so reading streams
            if split in self.test_subsample:             # the paper's test size, the same rows for every run
                rows = subsample_rows(counts[split], self.test_subsample[split], self.test_subsample_seed, k)
                plan[split] = np.sort(rows[: self.max_eval_samples])
                continue
            plan[split] = np.sort(_select(counts[split], self.max_eval_samples, self.seed, k))
        for name, idx in plan.items():
            if len(idx) == 0:
                source = "train" if name == "val" else name
                raise UserError(f"split {name!r} is empty ({counts.get(source, 0)} rows of {source!r} in "
                                f"{self._dir}, limits {self.max_train_samples}/{self.max_eval_samples}): "
                                "re-export, or raise dataset.datamodule.max_*_samples")
        return plan

    def _texts(self, manifest: dict, split: str, idx: np.ndarray) -> Iterator[str]:
        """Claims 1-20 of the selected rows, lazily (a tokenizer with a cached vocab never reads them)."""
        for row, text in zip(idx, _iter_rows(self._dir, manifest, split, "claims", idx)):
            yield join_claims(claims_text(text, self._dir, split, int(row)))

    def _build(self) -> None:
        if self._splits:
            return
        self._dir, standin_note = self._export_dir()
        manifest = load_manifest(self._dir)
        verify_manifest(self._dir, manifest)   # shards vs their recorded sha256, so the cache key is the content
        counts = split_counts(manifest["shards"])
        plan = self._plan(counts)
        cache_dir = Path(self.cache_dir) if self.cache_dir else self._dir / "cache"
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.tokenizer.prepare(self._texts(manifest, "train", plan["train"]), cache_dir / "tokenizer")
        key_src = json.dumps({"v": _CACHE_VERSION, "tok": self.tokenizer.cache_key(),
                              "data": manifest_digest(manifest), "labeling": self.labeling,
                              "limits": [self.max_train_samples, self.max_eval_samples],
                              "seed": self.seed, "val_fraction": self.val_fraction,
                              # only when set: caches written before the switch keep their keys
                              **({"test_subsample": [self.test_subsample, self.test_subsample_seed]}
                                 if self.test_subsample else {})}, sort_keys=True)
        key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
        path = cache_dir / f"patents-{key}.pt"
        cache = None
        if path.is_file():
            try:
                cache = torch.load(path, weights_only=True)
                log.info("loaded tokenized patents from %s", path)
            except Exception:  # noqa: BLE001  (a damaged cache file is rebuilt, never trusted)
                log.warning("token cache %s is unreadable: rebuilding it", path)
        if cache is None:
            cache = self._encode_all(manifest, plan)
            tmp = path.with_name(f".{path.name}.tmp")
            torch.save(cache, tmp)
            os.replace(tmp, path)
            log.info("cached tokenized patents at %s", path)
        self.label_vocab = LabelVocabulary(tuple(cache["labels"]), self.labeling)
        self._check_labels(len(self.label_vocab), len(plan["train"]) + len(plan["val"]))
        self.label_vocab.save(cache_dir / f"labels-{key}.json")
        self.encode_stats = dict(cache.get("encode_stats", {}))
        self.data_info = {"data_dir": str(self._dir), "synthetic": bool(manifest.get("synthetic", False)),
                          "manifest_digest": manifest_digest(manifest), "cache": str(path),
                          "rows": {n: int(len(i)) for n, i in plan.items()}, "num_labels": len(self.label_vocab)}
        if standin_note:
            self.data_info["standin"] = standin_note
        if self.data_info["synthetic"]:
            log.warning("USPTO datamodule is reading SYNTHETIC patents from %s", self._dir)
        self._splits = {n: _EncodedSplit(cache["splits"][n], len(self.label_vocab)) for n in plan}

    def _export_dir(self) -> tuple[Path, str | None]:
        """The export folder; in a dry run without one, a generated full-schema stand-in (`langrepr.data.standin`)."""
        try:
            return resolve_data_dir(self.data_dir), None
        except UserError as err:
            if not standin.enabled():
                raise
            root = Path(self.cache_dir) if self.cache_dir else Path("outputs") / "cache" / "uspto"
            note = (f"dry run: no USPTO export ({err}); a generated stand-in in the export's schema with the paper's "
                    f"{standin.USPTO_SUBCLASSES} subclasses (1,328 First/Later labels), not data")
            log.warning("%s", note)
            return standin.uspto_export(root), note

    def _check_labels(self, n_labels: int, n_rows: int) -> None:
        """No CPC code in the training rows: say so, not "num_labels must be >= 1" from the model (issue 21 u12)."""
        if n_labels == 0:
            raise UserError(f"USPTO export {self._dir}: none of the {n_rows} training documents has a CPC code (every "
                            "cpc list is empty), so there is nothing to classify: the export lost its cpc column; "
                            "re-export (`python -m langrepr.data.patents.export export ...`) or point "
                            "LANGREPR_USPTO_DIR at a complete export")

    def _encode_all(self, manifest: dict, plan: dict[str, np.ndarray]) -> dict[str, Any]:
        """Labels and token tensors for every split (the expensive path, run once per cache key)."""
        sources = {"train": "train", "val": "train", "2015A": "2015A", "2015B": "2015B"}
        pool = np.sort(np.concatenate([plan["train"], plan["val"]]))
        vocab = LabelVocabulary.fit(_iter_rows(self._dir, manifest, "train", "cpc", pool), self.labeling)
        self._check_labels(len(vocab), len(pool))   # before the expensive encoding
        dtype = _id_dtype(int(self.tokenizer.vocab_size))
        out: dict[str, Any] = {"labels": list(vocab.labels), "splits": {}}
        n_docs, seconds = 0, 0.0
        for name, idx in plan.items():
            ids, masks, texts = [], [], self._texts(manifest, sources[name], idx)
            n_empty = 0
            while chunk := list(itertools.islice(texts, _ENCODE_CHUNK)):
                n_empty += sum(1 for t in chunk if not t.strip())
                t0 = time.perf_counter()
                enc = self.tokenizer.encode(chunk)
                seconds += time.perf_counter() - t0
                n_docs += len(chunk)
                if int(enc["input_ids"].max()) > torch.iinfo(dtype).max:
                    raise ValueError(f"tokenizer ids exceed vocab_size={self.tokenizer.vocab_size}; cannot cache "
                                     f"them as {dtype}")
                ids.append(enc["input_ids"].to(dtype))
                masks.append(enc["attention_mask"].to(torch.uint8))
            check_documents(f"USPTO export {self._dir}", name, len(idx), n_empty)
            rows = vocab.encode(_iter_rows(self._dir, manifest, sources[name], "cpc", idx))
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([len(r) for r in rows])
            out["splits"][name] = {
                "input_ids": torch.cat(ids), "attention_mask": torch.cat(masks),
                "label_index": torch.tensor([c for r in rows for c in r], dtype=torch.int32),
                "label_offsets": torch.from_numpy(offsets),
            }
        out["encode_stats"] = {"docs": n_docs, "seconds": round(seconds, 3),
                               "docs_per_s": round(n_docs / max(seconds, 1e-9), 1)}
        log.info("tokenized %d patents in %.1f s (%.0f docs/s)", n_docs, seconds, n_docs / max(seconds, 1e-9))
        return out

    # --- loaders ----------------------------------------------------------------------------
    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        self._build()
        return batch_loader(self._splits[name], self.batch_size, shuffle, self.seed, self.num_workers)

    def test_dataloader(self) -> list[DataLoader]:
        return [self._loader(name, shuffle=False) for name in self.test_splits]


def export_table2_stats(data_dir: str | os.PathLike | None = None, coverage: float = 0.9) -> dict[str, Any]:
    """Table 2 of the paper computed on an export (all rows of every split), plus provenance."""
    path = resolve_data_dir(data_dir)
    manifest = load_manifest(path)
    verify_manifest(path, manifest)
    counts = split_counts(manifest["shards"])
    stats = table2_stats({s: list(_iter_rows(path, manifest, s, "cpc", np.arange(counts[s]))) for s in SPLITS},
                         coverage=coverage)
    return {"synthetic": bool(manifest.get("synthetic", False)), "manifest_digest": manifest_digest(manifest),
            "splits": stats}


def main(argv: list[str] | None = None) -> int:
    """``python -m langrepr.data.patents.uspto {export ...|stats DIR}``; UserError -> one line, exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["export"]:
        from langrepr.data.patents import export as uspto_export  # BigQuery stays confined to that module
        return uspto_export.main(argv)
    try:
        if argv[:1] == ["stats"] and len(argv) in (1, 2):
            print(json.dumps(export_table2_stats(argv[1] if len(argv) == 2 else None), indent=2))
            return 0
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("usage: python -m langrepr.data.patents.uspto {export --project P --out DIR ... | stats [DIR]}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
