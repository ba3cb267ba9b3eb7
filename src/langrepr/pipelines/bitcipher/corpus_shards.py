"""Pass 1 of co-occurrence training: tokenise a corpus once into shard files and count words / documents.

Each shard ``shards/00000.npz`` holds its own first-occurrence word list (``words``), the token ids into it
(``ids``), document offsets (``doc_offsets``), and per-word token and document counts. Shards are written
atomically and skipped when they exist, so a crashed tokenisation resumes from its finished shards. Shards are
tokenised by a process pool (``workers``) with at most ``2 × workers`` shards of text in flight (bounded memory).
Merging counts in shard order keeps ties ranked by first occurrence in the whole corpus.

With several sources, ``interleave_seed`` (an int) merges their documents in a seeded random order before the
shards (and a ``max_tokens`` prefix) are cut, so that every prefix holds each source in about its share of the
whole instead of the first sources only (`interleaved_documents`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from langrepr.data.english.corpus import iter_documents, text_shards, tokenize_documents
from langrepr.data.integrity import file_digests
from langrepr.errors import UserError
from langrepr.utils import open_mode, write_json_atomic

log = logging.getLogger("langrepr.pipelines")
_TOKENIZER = None


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]


def source_contents(sources: Iterable[dict], data_dir: str | Path | None) -> list[str | None]:
    """sha256 of each local source file (None for a hub stream, or a file that is not there: reading it fails).

    Part of every cache key built from the corpus, so new text in the same place is a new cache.
    """
    out: list[str | None] = []
    for source in sources:
        path = Path(data_dir) / source["path"] if "path" in source and data_dir is not None else None
        if path is None or not path.is_file():
            out.append(None)
            continue
        out.append(file_digests([path])[str(path.resolve())])
    return out


def interleaved_documents(sources: Iterable[dict], data_dir: str | Path | None, seed: int) -> Iterator[str]:
    """The documents of every source, merged in a seeded random order that keeps each source's own order.

    A document is what the source's reader yields (one line of a text file, one CSV row, one sentence of a
    CoNLL / CoNLL-U file): the unit the co-occurrence window never crosses, so the merge splits or joins no
    context window. The merge is a uniform random interleaving: the source label of every document is shuffled
    once (``numpy.random.default_rng(seed)``), so any prefix holds each source's documents in about its share of
    the whole, and the same seed gives the same order. Needs local sources (it counts each source's documents
    in a first pass); a single source is returned as it is.
    """
    sources = [dict(s) for s in sources]
    if len(sources) < 2:
        yield from iter_documents(sources, data_dir)
        return
    if any("hf" in s for s in sources):
        raise UserError("corpus.interleave_seed needs local corpus sources (it counts each source's documents "
                        "first): drop interleave_seed or the hub sources")
    counts = [sum(1 for _ in iter_documents([s], data_dir)) for s in sources]
    order = np.repeat(np.arange(len(sources)), counts)
    np.random.default_rng(int(seed)).shuffle(order)
    streams = [iter_documents([s], data_dir) for s in sources]
    for k in order.tolist():
        yield next(streams[k])


def encode_shard(texts: list[str], lowercase: bool = True) -> dict[str, np.ndarray]:
    """Tokenise one shard of documents into local ids + counts (the unit of work of a pool process)."""
    global _TOKENIZER
    from langrepr.data.english.corpus import spacy_tokenizer

    if _TOKENIZER is None:
        _TOKENIZER = spacy_tokenizer()
    docs = [d for d in tokenize_documents(texts, lowercase, _TOKENIZER) if d]
    index: dict[str, int] = {}
    ids = np.fromiter((index.setdefault(w, len(index)) for d in docs for w in d), dtype=np.int32)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    counts = np.bincount(ids, minlength=len(index)).astype(np.int64)
    doc_ids = np.repeat(np.arange(len(docs)), np.diff(offsets))
    pairs = np.unique(doc_ids.astype(np.int64) * max(len(index), 1) + ids)   # (doc, word) present
    doc_counts = np.bincount(pairs % max(len(index), 1), minlength=len(index)).astype(np.int64)
    return {"words": np.array(list(index), dtype=object), "ids": ids, "doc_offsets": offsets,
            "counts": counts, "doc_counts": doc_counts}


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npz")
    open_mode(fd)  # readable as the umask allows, not mkstemp's 0600
    os.close(fd)
    try:
        np.savez(tmp, **{k: (v.astype(str) if v.dtype == object else v) for k, v in arrays.items()})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _encode_and_save(job: tuple[int, list[str], str, bool]) -> int:
    index, texts, folder, lowercase = job
    save_npz_atomic(Path(folder) / f"{index:05d}.npz", encode_shard(texts, lowercase))
    return index


def tokenise_corpus(cache_root: str | Path, sources: Iterable[dict], data_dir: str | Path | None,
                    shard_tokens: int = 1_000_000, max_tokens: int | None = None, lowercase: bool = True,
                    workers: int = 2, interleave_seed: int | None = None) -> Path:
    """Tokenised shards of the corpus under ``cache_root/corpus-<hash>`` (reused when already complete).

    The hash covers the settings and the content of every local source file (`source_contents`).
    `interleave_seed`: merge the sources' documents in a seeded order (`interleaved_documents`) before the
    shards and the `max_tokens` prefix are cut; None reads the sources one after the other.
    """
    sources = [dict(s) for s in sources]
    spec = {"sources": sources, "shard_tokens": shard_tokens, "max_tokens": max_tokens, "lowercase": lowercase,
            "tokenizer": "spacy.blank(en)", "content": source_contents(sources, data_dir)}
    if interleave_seed is not None:   # only then, so the key of a concatenated corpus stays what it was
        spec["interleave_seed"] = int(interleave_seed)
    folder = Path(cache_root) / f"corpus-{spec_hash(spec)}"
    if (folder / "corpus.json").exists():
        return folder
    shard_dir = folder / "shards"
    shard_dir.mkdir(parents=True, exist_ok=True)
    documents = (iter_documents(sources, data_dir) if interleave_seed is None
                 else interleaved_documents(sources, data_dir, int(interleave_seed)))
    texts = text_shards(documents, shard_tokens, max_tokens)
    jobs = ((i, t, str(shard_dir), lowercase) for i, t in enumerate(texts))
    todo = (j for j in jobs if not (shard_dir / f"{j[0]:05d}.npz").exists())  # resume: skip finished shards
    n_done = 0
    global _TOKENIZER
    if _TOKENIZER is None:                                      # loaded once here, inherited by forked workers
        from langrepr.data.english.corpus import spacy_tokenizer

        _TOKENIZER = spacy_tokenizer()
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            pending = []
            for job in todo:
                pending.append(pool.apply_async(_encode_and_save, (job,)))
                while len(pending) >= 2 * workers:            # bounded: few shards of text in memory
                    pending.pop(0).get()
                    n_done += 1
            for p in pending:
                p.get()
                n_done += 1
    else:
        for job in todo:
            _encode_and_save(job)
            n_done += 1
    shards = sorted(shard_dir.glob("*.npz"))
    if not shards:
        raise UserError("the corpus gave no documents: check the corpus sources (empty file or max_tokens=0)")
    write_json_atomic(folder / "corpus.json", {**spec, "n_shards": len(shards), "tokenised_now": n_done})
    return folder


def corpus_shards(folder: str | Path) -> list[Path]:
    return sorted((Path(folder) / "shards").glob("*.npz"))


def load_shard(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def merged_counts(folder: str | Path) -> tuple[dict[str, int], dict[str, int], int, int]:
    """(token counts, document counts, number of documents, number of tokens) over all shards, in shard order."""
    counts: dict[str, int] = {}
    docs: dict[str, int] = {}
    n_docs = n_tokens = 0
    for path in corpus_shards(folder):
        shard = load_shard(path)
        if len(shard["ids"]) == 0:
            raise UserError(f"corpus shard {path.name} is empty: delete {path} and check the corpus source")
        for w, c, d in zip(shard["words"].tolist(), shard["counts"].tolist(), shard["doc_counts"].tolist()):
            counts[w] = counts.get(w, 0) + c
            docs[w] = docs.get(w, 0) + d
        n_docs += len(shard["doc_offsets"]) - 1
        n_tokens += len(shard["ids"])
    return counts, docs, n_docs, n_tokens
