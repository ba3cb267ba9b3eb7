"""GloVe trained here on a classification training split: LEAM's word and label starts (issue 35 item 3).

Why a pipeline module with a callback: the vectors come from the Bit Cipher GloVe (`langrepr.pipelines.bitcipher.glove`),
and neither the datamodule (data) nor the LEAM task may import a pipeline. `langrepr.train` adds `TrainedGloveStart`
to a cell whose net asks for ``word_init: trained_glove``; before training it reads the datamodule's training texts
(`glove_corpus`, never validation or test), trains or reuses the cached vectors and hands the file to the datamodule
as its `word_vectors_file`, which the task's own setup then loads as it loads a downloaded GloVe file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl

from langrepr.errors import UserError
from langrepr.utils import write_json_atomic

log = logging.getLogger(__name__)

GLOVE_DEFAULTS = {"window": 10, "epochs": 25, "lr": 0.05, "x_max": 100.0, "alpha": 0.75, "batch_size": 65536,
                  "output": "sum", "seed": 1}


def glove_settings(spec: dict | None) -> dict:
    """The GloVe training settings: `GLOVE_DEFAULTS` overridden by `spec`; an unknown key is one clear line."""
    spec = dict(spec or {})
    unknown = sorted(set(spec) - set(GLOVE_DEFAULTS))
    if unknown:
        raise UserError(f"model.net.glove has unknown setting(s) {', '.join(unknown)}: use "
                        f"{', '.join(GLOVE_DEFAULTS)}")
    return {**GLOVE_DEFAULTS, **spec}


def trained_glove(texts: Sequence[str], vocab: Sequence[str], dim: int, out_dir: str | Path, spec: dict | None = None,
                  lowercase: bool = True) -> tuple[Path, dict]:
    """GloVe vectors for `vocab` trained on `texts` (the training split), as a GloVe text file; (path, what to record).

    Documents are split as the word tokenizer splits them (`vocab.split_words`), so every vocabulary word has its
    own row; a word outside `vocab` counts as the one OOV row, as in the Bit Cipher corpus. Rows with no
    co-occurrence ([PAD], [UNK]) are not written, so they keep the net's random start. The cache key covers the
    texts' sha256, the vocabulary, `dim` and every setting of `glove_settings(spec)`; a finished file is reused.
    """
    from langrepr.data.classification.vocab import split_words
    from langrepr.pipelines.bitcipher.corpus_shards import save_npz_atomic
    from langrepr.pipelines.bitcipher.glove import glove_vectors  # torch-heavy: only when GloVe is asked for

    settings = glove_settings(spec)
    if not texts:
        raise UserError("model.net.word_init=trained_glove needs training texts: the training split is empty")
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "replace") + b"\0")
    key = {"texts": digest.hexdigest(), "n_texts": len(texts), "lowercase": lowercase, "dim": int(dim),
           "vocab": hashlib.sha256("\n".join(vocab).encode()).hexdigest(), **settings}
    name = "glove-trained-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    folder = Path(out_dir) / name
    out, manifest = folder / "vectors.txt", folder / "manifest.json"
    if out.is_file() and manifest.is_file():
        return out, {"word_vectors": f"trained_glove ({name})", **json.loads(manifest.read_text())["record"]}
    started = time.time()
    docs = [split_words(t, lowercase) for t in texts]
    docs = [d for d in docs if d]
    index: dict[str, int] = {}
    ids = np.fromiter((index.setdefault(w, len(index)) for d in docs for w in d), dtype=np.int32)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    save_npz_atomic(folder / "corpus" / "shards" / "00000.npz",     # the Bit Cipher shard layout glove_vectors reads
                    {"words": np.array(list(index), dtype=object), "ids": ids, "doc_offsets": offsets})
    training = {k: v for k, v in settings.items() if k not in ("window", "seed")}
    vectors = glove_vectors(folder / "corpus", list(vocab), int(dim), int(settings["seed"]),
                            window=int(settings["window"]), **training)
    rows = [f"{w} {' '.join(f'{x:.6g}' for x in vectors[i])}\n" for i, w in enumerate(vocab)
            if " " not in w and np.any(vectors[i])]
    seconds = time.time() - started
    record = {"word_vectors_found": len(rows), "glove_tokens": int(len(ids)), "glove_docs": len(docs),
              "glove_seconds": round(seconds, 1)}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text("".join(rows), encoding="utf-8")
    os.replace(tmp, out)
    write_json_atomic(manifest, {"key": key, "record": record})
    log.info("word vectors: GloVe trained on %d training texts (%d tokens), %d of %d vocabulary words, %.0f s",
             len(docs), len(ids), len(rows), len(vocab), seconds)
    return out, {"word_vectors": f"trained_glove ({name})", **record}


class TrainedGloveStart(pl.Callback):
    """Train (or reuse) GloVe on the training split before fit and give its file to the datamodule."""

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        net = getattr(pl_module, "net", None)
        if stage != "fit" or getattr(net, "word_init", None) != "trained_glove":
            return
        datamodule = trainer.datamodule
        texts, vocab, out_dir, lowercase = datamodule.glove_corpus()
        path, info = trained_glove(texts, vocab, net.embedding.embedding_dim, out_dir, net.glove, lowercase=lowercase)
        datamodule.data_info.update(info)
        datamodule.word_vectors_file = path
