"""Content digests of the data a run reads, manifest checks, and corpus sanity checks.

Why: a cell's result depends on its data, not only on its config. Its identity therefore includes a
digest of the files it actually reads, and the parquet shards are checked against the sha256 their
manifest records before they are used (a truncated, flipped or replaced shard must never train).

Hashing a corpus on every run would cost seconds to minutes, so each file's sha256 is cached keyed by
(path, size, mtime, ctime, inode): an unchanged file is never read again, while any write — even one
that restores the mtime — changes the ctime and forces a rehash. The cache is one JSON file
(`$LANGREPR_DIGEST_CACHE`, default `~/.cache/langrepr/digests.json`), written atomically.

What a cell read is recorded as it runs (`recording_reads`): every file it opens for reading under its data
roots (seen through a Python audit hook, so every reader is covered without declaring its files) and every file
digested here (a cache hit reads no input but is keyed by the inputs' digests). The cell stores their sha256 in
`metrics.json` and is reused only while they are unchanged (`changed_files`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langrepr.errors import UserError

CACHE_ENV = "LANGREPR_DIGEST_CACHE"
REBUILD_EXPORT = ("re-run the export (`python -m langrepr.data.patents.export export ...`, it resumes) or "
                  "restore the file")

# data sanity (one line instead of a silent run on a useless corpus)
MIN_TRAIN_TOKENS = 200          # a corpus shorter than this cannot train a language model
MIN_EVAL_COVERAGE = 0.5         # share of evaluation tokens the training vocabulary must cover
MAX_EMPTY_DOC_SHARE = 0.5       # above this share of empty documents, a split is refused


def _cache_path() -> Path:
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "langrepr" / "digests.json"


def _load_cache() -> dict[str, Any]:
    try:
        return json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}   # missing or damaged cache: rehash (it is only a cache)


def _save_cache(cache: dict[str, Any]) -> None:
    from langrepr.utils import write_json_atomic

    try:
        write_json_atomic(_cache_path(), cache)
    except OSError:
        pass        # read-only home: digests are recomputed next time, nothing is lost


def sha256_stream(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digests(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """sha256 of each file (absolute path -> hex), reusing cached values for files that did not change."""
    cache, dirty, out = _load_cache(), False, {}
    paths = [Path(p).resolve() for p in paths]
    note_read(paths)
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            raise UserError(f"data file {path} is missing: restore it or point the data path elsewhere") from None
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        hit = cache.get(str(path))
        if hit and hit.get("stamp") == stamp:
            out[str(path)] = hit["sha256"]
            continue
        try:
            digest = sha256_stream(path)
        except OSError as err:
            raise UserError(f"cannot read data file {path} ({err.strerror}): fix its permissions or restore it") from None
        cache[str(path)] = {"stamp": stamp, "sha256": digest}
        out[str(path)], dirty = digest, True
    if dirty:
        _save_cache(cache)
    return out


def combined_digest(named: dict[str, str]) -> str:
    """One short digest of {name: sha256}, order-independent."""
    h = hashlib.sha256()
    for name in sorted(named):
        h.update(f"{name}:{named[name]}\n".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- what a cell read

class Reads:
    """The data files one cell read: opened for reading under one of `roots` (outside `exclude`), or digested."""

    def __init__(self, roots: Iterable[str | os.PathLike] = (), exclude: Iterable[str | os.PathLike] = ()):
        self.roots = [os.path.realpath(r) for r in roots]
        self.exclude = [os.path.realpath(e) for e in exclude]
        self.files: set[str] = set()

    def consider(self, path: str | bytes | os.PathLike) -> None:
        real = os.path.realpath(os.fsdecode(path))
        if any(_under(real, e) for e in self.exclude) or not any(_under(real, r) for r in self.roots):
            return
        if os.path.isfile(real):
            self.files.add(real)

    def digests(self) -> dict[str, str]:
        """{path: sha256} of every file read (cached by stat, so this reads nothing twice)."""
        return file_digests(sorted(self.files)) if self.files else {}


_RECORDING: list[Reads] = []   # the cells (and caches) recording now, innermost last
_HOOKED = False


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _on_audit(event: str, args: tuple) -> None:
    """`sys.addaudithook` callback: a file opened for reading while a cell records is one it read."""
    if event != "open" or not _RECORDING:
        return
    try:
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        if mode is None:                                   # os.open: flags say how
            if flags & (os.O_WRONLY | os.O_RDWR):
                return
        elif any(c in mode for c in "wax+"):
            return
        for reads in list(_RECORDING):
            reads.consider(path)
    except Exception:  # noqa: BLE001  (an audit hook must never break the open it watches)
        pass


@contextmanager
def recording_reads(roots: Iterable[str | os.PathLike] = (), exclude: Iterable[str | os.PathLike] = ()
                    ) -> Iterator[Reads]:
    """Record the data files read inside the block (see `Reads`); blocks nest, each sees what is read inside it."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_on_audit)   # installed once per process; idle (one comparison) outside these blocks
        _HOOKED = True
    reads = Reads(roots, [*exclude, _cache_path()])
    _RECORDING.append(reads)
    try:
        yield reads
    finally:
        _RECORDING.remove(reads)


def note_read(paths: Iterable[str | os.PathLike]) -> None:
    """Count `paths` as read by every recording block (a cache hit reads no input, but depends on it)."""
    for reads in _RECORDING:
        reads.files.update(os.path.realpath(p) for p in paths)


def changed_files(recorded: dict[str, str]) -> tuple[list[str], list[str]]:
    """(changed, missing): which of the recorded {path: sha256} now hold other content, and which are gone."""
    present = [p for p in recorded if os.path.isfile(p)]
    now = file_digests(present)
    changed = [p for p in present if now.get(str(Path(p).resolve())) != recorded[p]]
    return changed, [p for p in recorded if p not in present]


# ---------------------------------------------------------------- parquet exports (manifest.json)

def read_manifest_checked(data_dir: Path) -> dict[str, Any] | None:
    """The export's manifest (None when absent); a damaged one is named with the fix."""
    path = Path(data_dir) / "manifest.json"
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        shards = manifest["shards"]
        for s in shards:
            s["file"], s["sha256"], s["split"], s["rows"]  # noqa: B018  (the keys readers rely on)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise UserError(f"{path} is damaged (not the JSON manifest an export writes): {REBUILD_EXPORT}") from None
    return manifest


def verify_manifest(data_dir: Path, manifest: dict[str, Any]) -> str:
    """Check every shard against the sha256 in the manifest; returns the export's content digest.

    The digest is computed from the files' real content (equal to the manifest's when they match),
    so caches keyed by it are keyed by what is on disk.
    """
    data_dir = Path(data_dir)
    paths = {s["file"]: data_dir / s["file"] for s in manifest["shards"]}
    for path in paths.values():
        if not path.is_file():
            raise UserError(f"shard {path} listed in {data_dir / 'manifest.json'} is missing: {REBUILD_EXPORT}")
    actual = file_digests(paths.values())
    for s in manifest["shards"]:
        if actual[str(paths[s["file"]].resolve())] != s["sha256"]:
            raise UserError(f"shard {paths[s['file']]} does not match the sha256 in its manifest (truncated, edited "
                            f"or replaced): {REBUILD_EXPORT}")
    return combined_digest({s["file"]: s["sha256"] for s in manifest["shards"]})


# ---------------------------------------------------------------- what a config reads

def _listed_files(node: dict[str, Any]) -> list[Path] | None:
    """Files a datamodule-like node reads from local disk; None when it reads a remote source."""
    data_dir = node.get("data_dir")
    if not data_dir:
        return None
    root = Path(str(data_dir)) / str(node.get("subdir") or "")
    files = node.get("files")
    if files:
        flat: list[str] = []
        for value in files.values():
            if value is None:
                continue
            flat.extend([value] if isinstance(value, str) else list(value))
        return [root / f for f in flat]
    if (root / "manifest.json").is_file():
        manifest = read_manifest_checked(root)
        return [root / "manifest.json"] + [root / s["file"] for s in manifest["shards"]]
    return []


def _source_files(nodes: Iterable[dict[str, Any]]) -> dict[str, str]:
    """{absolute path: sha256} of the local files the nodes read; empty when any source is remote or absent."""
    named: dict[str, str] = {}
    for node in nodes:
        files = _listed_files(node)
        if not files or not all(f.is_file() for f in files):
            return {}
        named.update(file_digests(files))
    return named


def source_digest(nodes: Iterable[dict[str, Any]]) -> str | None:
    """Digest of the local files the given config nodes read; None when any source is remote or absent.

    None means "unknown yet" (a hub dataset, or synthetic data generated on first use): callers then
    take the digest again after loading.
    """
    named = _source_files(nodes)
    return combined_digest(named) if named else None


def source_contents(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """sha256 of every local file the nodes read, sorted; empty when a source is remote or absent.

    The digest names each file by its path, so a checkout moved to another folder (or a cluster that mounts the
    data elsewhere) changes it; these contents are what a finished cell's `data_files` can be checked against.
    """
    return sorted(_source_files(nodes).values())


# ---------------------------------------------------------------- corpus sanity

def check_corpus(name: str, train_tokens: int, eval_tokens: int, covered_eval_tokens: int) -> None:
    """Refuse corpora that would train silently to a meaningless number (e.g. a 5-word training file)."""
    if train_tokens < MIN_TRAIN_TOKENS:
        raise UserError(f"{name}: the training split has only {train_tokens} tokens (< {MIN_TRAIN_TOKENS}); "
                        "point the data path at the real corpus")
    if eval_tokens and covered_eval_tokens / eval_tokens < MIN_EVAL_COVERAGE:
        raise UserError(f"{name}: the training vocabulary covers only {covered_eval_tokens / eval_tokens:.0%} of the "
                        f"evaluation tokens (< {MIN_EVAL_COVERAGE:.0%}): the splits do not belong to the same corpus; "
                        "check the files named in dataset.datamodule.files")


def check_documents(name: str, split: str, n_docs: int, n_empty: int) -> None:
    """Refuse a split whose documents are mostly empty (an export with no claim text)."""
    if n_docs and n_empty / n_docs > MAX_EMPTY_DOC_SHARE:
        raise UserError(f"{name}: {n_empty} of {n_docs} documents in split '{split}' have no text: the export lost "
                        "its claims; re-export with claims_localized in the query or check the language filter")
