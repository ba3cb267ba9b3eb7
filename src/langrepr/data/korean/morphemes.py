"""Morpheme analysis with kiwipiepy (standing in for the paper's UTagger, which is not public), cached per corpus.

A sentence becomes a list of `(form, tag)` morphemes. Analysis runs in worker processes (one Kiwi per worker,
started once per call) and is cached as gzip'd JSON lines keyed by the corpus key and the analyser version, so a
second run of the same corpus reads the cache instead of re-analysing.

The calling process never loads Kiwi: its model takes about 0.3 GB, 0.8 GB once it has analysed text, and deleting
it frees little of that, so a cell that analysed its corpus in-process kept it for the rest of its run.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import multiprocessing as mp
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from langrepr.errors import UserError
from langrepr.utils import open_mode

Morpheme = tuple[str, str]
_WORKER_KIWI = None
_WORKER_ERROR: Exception | None = None


def analyser_name() -> str:
    """The analyser and version a cache or token list was built with (a list built by another is rejected)."""
    import kiwipiepy

    return f"kiwipiepy {kiwipiepy.__version__}"


def base_tag(tag: str) -> str:
    """Kiwi marks (ir)regular conjugation as `VV-R`/`VA-I`; the POS embedding uses the plain Sejong tag."""
    return tag.split("-", 1)[0]


def new_kiwi():
    from kiwipiepy import Kiwi

    return Kiwi(num_workers=-1)  # -1: single-threaded inside each worker process


def _init_worker() -> None:
    global _WORKER_KIWI, _WORKER_ERROR
    if _WORKER_KIWI is None:
        try:
            _WORKER_KIWI = new_kiwi()
        except Exception as err:  # noqa: BLE001  (re-raised by the first task, in the caller: a pool whose
            _WORKER_ERROR = err   # initializer raises restarts its worker for ever instead of failing)


def _worker_kiwi():
    if _WORKER_ERROR is not None:
        raise _WORKER_ERROR
    return _WORKER_KIWI


def _analyse_chunk(sentences: Sequence[str], offsets: bool = False) -> list[list]:
    out = []
    for sentence in sentences:
        tokens = _worker_kiwi().tokenize(sentence) if sentence.strip() else []
        if offsets:   # (form, tag, start, end): character span in the input, to map answers back to raw text
            out.append([(t.form, base_tag(t.tag), t.start, t.end) for t in tokens])
        else:
            out.append([(t.form, base_tag(t.tag)) for t in tokens])
    return out


def analyse(sentences: Sequence[str], workers: int = 2, chunk_size: int = 256, offsets: bool = False
            ) -> list[list]:
    """Morphemes with POS tags for every sentence, in order, using `workers` child processes (at least one).

    Each child loads its own Kiwi (about a second) and frees it when the call ends (see the module docstring).
    """
    chunks = [sentences[i:i + chunk_size] for i in range(0, len(sentences), chunk_size)]
    if not chunks:
        return []
    with _analyser_pool(min(max(workers, 1), len(chunks))) as pool:
        return [m for part in pool.imap(functools.partial(_analyse_chunk, offsets=offsets), chunks) for m in part]


def _analyser_pool(workers: int):
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method).Pool(workers, initializer=_init_worker)


def corpus_key(name: str, sentences: Sequence[str]) -> str:
    """Cache key: the corpus name, the analyser version and a hash of the exact sentences analysed."""
    digest = hashlib.sha256()
    for s in sentences:
        digest.update(s.encode())
        digest.update(b"\n")
    return f"{name}.{analyser_name().replace(' ', '-')}.{digest.hexdigest()[:16]}"


def cached_analysis(name: str, sentences: Sequence[str], cache_dir: str | Path, workers: int = 2,
                    offsets: bool = False) -> list[list]:
    """`analyse` with a per-corpus cache file; a rerun over the same sentences reads it back."""
    if not sentences:
        raise UserError(f"corpus '{name}' is empty: point it at a file with at least one non-empty line")
    suffix = ".offsets" if offsets else ""
    path = Path(cache_dir) / "korean_morphemes" / f"{corpus_key(name, sentences)}{suffix}.jsonl.gz"
    if path.exists():
        return read_analysis(path)
    analysed = analyse(sentences, workers=workers, offsets=offsets)
    write_analysis(path, analysed)
    return analysed


def write_analysis(path: Path, analysed: Iterable[list[Morpheme]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    open_mode(fd)       # the cached analysis is shared like the rest of the cache, not owner-only
    os.close(fd)
    try:
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            for morphemes in analysed:
                fh.write(json.dumps(morphemes, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_analysis(path: Path) -> list[list[Morpheme]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [[tuple(m) for m in json.loads(line)] for line in fh]


@functools.lru_cache(maxsize=4)
def dictionary_entries(tags: tuple[str, ...]) -> frozenset[Morpheme]:
    """Single-word `(form, tag)` entries of the analyser's built-in dictionary with the given base tags.

    Multi-word entries (Kiwi's compound-noun dictionary, forms with a space) are left out, as the paper leaves
    out compound nouns. Kiwi does not mark single-word compounds, so those remain [inferred]. Read in a child
    process, like the analysis (the module docstring says why).
    """
    with _analyser_pool(1) as pool:
        return pool.apply(_dictionary_entries, (tags,))


def _dictionary_entries(tags: tuple[str, ...]) -> frozenset[Morpheme]:
    kiwi, wanted, out, index = _worker_kiwi(), set(tags), set(), 0
    while True:
        try:
            m = kiwi.morpheme(index)
        except ValueError:  # past the last morpheme id
            return frozenset(out)
        index += 1
        tag = base_tag(m.tag)
        if tag in wanted and m.form and " " not in m.form:
            out.add((m.form, tag))
