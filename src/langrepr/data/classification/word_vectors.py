"""Pretrained word vectors for the LEAM tables: GloVe rows for the training vocabulary, from a file or the hub.

The LEAM paper initialises its word (and, through the class names, label) embeddings from pretrained vectors
(§3: "the pre-trained word embeddings are used as initialization if available"; the official code: 300-d GloVe,
trainable; METHODS.md §4.1). `dataset.datamodule.word_vectors` names them:

- ``null``: none; the models start from random vectors (LEAM: U(-0.001, 0.001), the official code's fallback),
  and the datamodule says so in one log line;
- a path: a GloVe text file (``word x1 .. xP`` per line) or a zip holding one (as Stanford ships them);
- ``hub:<owner>/<repo>/<file>``: that file of a Hugging Face model repository, e.g.
  ``hub:stanfordnlp/glove/glove.840B.300d.zip`` (downloaded once into the hub cache).

Only the rows of the training vocabulary are kept: they are written once to a small GloVe-format file in the cache
(keyed by the source, its size and mtime, the vocabulary and the width), which the model's GloVe loader reads
(`langrepr.models.leam.load_glove`). A token holding spaces (glove.840B has a few) cannot be a vocabulary word and
is skipped; a line whose width differs from the model's is an error naming the line.

The other source, GloVe trained here on the training split, is `langrepr.pipelines.trained_glove` (the Bit Cipher GloVe)
on the training split's texts only, so no vector has seen a validation or test document; LEAM asks for it with
``model.net.word_init=trained_glove`` (the quick profile has no GloVe file and no network). Its GloVe-format file
is cached under a key of the texts' content, the vocabulary and every training setting, and built once for all
seeds and rows that ask for the same one.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from langrepr.data import standin
from langrepr.errors import UserError

log = logging.getLogger(__name__)

HUB_PREFIX = "hub:"


def fetch(spec: str) -> Path:
    """The local file behind `spec` (a path, or ``hub:<owner>/<repo>/<file>`` downloaded into the hub cache)."""
    if spec.startswith(HUB_PREFIX):
        parts = spec[len(HUB_PREFIX):].split("/", 2)
        if len(parts) != 3 or not all(parts):
            raise UserError(f"dataset.datamodule.word_vectors={spec!r}: write hub:<owner>/<repo>/<file>, e.g. "
                            "hub:stanfordnlp/glove/glove.840B.300d.zip")
        from huggingface_hub import hf_hub_download

        try:
            return Path(hf_hub_download(f"{parts[0]}/{parts[1]}", parts[2]))
        except Exception as err:  # offline, no such file, ...: one actionable line
            raise UserError(f"could not download {parts[2]} of {parts[0]}/{parts[1]} from the Hugging Face Hub "
                            f"({type(err).__name__}): go online once, or set dataset.datamodule.word_vectors to a "
                            "local GloVe .txt / .zip file (null: random word vectors)") from None
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserError(f"word vectors {path} do not exist: set dataset.datamodule.word_vectors to a GloVe .txt / "
                        ".zip file, hub:<owner>/<repo>/<file>, or null (random word vectors)")
    return path


def glove_lines(path: Path) -> Iterator[str]:
    """The text lines of a GloVe file, or of the one .txt member of a zip."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.endswith(".txt")]
            if len(members) != 1:
                raise UserError(f"{path} holds {len(members)} .txt files ({', '.join(members[:4])}): name one GloVe "
                                "file (unzip it and set dataset.datamodule.word_vectors to the .txt)")
            with archive.open(members[0]) as raw:
                yield from io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        return
    with path.open(encoding="utf-8", errors="replace") as fh:
        yield from fh


def glove_subset(source: Path, vocab: Sequence[str], dim: int, out_dir: str | Path) -> tuple[Path, int]:
    """The rows of `source` for the words of `vocab`, as a GloVe text file in `out_dir`; (its path, rows found)."""
    stat = source.stat()
    key = hashlib.sha256(json.dumps([str(source.resolve()), stat.st_size, int(stat.st_mtime), dim,
                                     hashlib.sha256("\n".join(vocab).encode()).hexdigest()]).encode()).hexdigest()[:16]
    out = Path(out_dir) / f"glove-{key}.txt"
    if out.is_file():
        return out, sum(1 for _ in out.open(encoding="utf-8"))
    wanted = set(vocab)
    found: dict[str, str] = {}
    for n, line in enumerate(glove_lines(source), 1):
        parts = line.rstrip("\n").rstrip(" ").split(" ")
        if len(parts) < dim + 1 or (n == 1 and len(parts) != dim + 1):
            raise UserError(f"{source}:{n} has {len(parts) - 1} values, expected {dim} (model.net.hidden_size): use a "
                            "GloVe file of that width")
        word = " ".join(parts[:-dim])
        if word in wanted and word not in found:
            found[word] = " ".join(parts[-dim:])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text("".join(f"{w} {found[w]}\n" for w in vocab if w in found), encoding="utf-8")
    os.replace(tmp, out)
    return out, len(found)


def word_vectors_for(spec: str | None, vocab: Sequence[str], dim: int, out_dir: str | Path
                     ) -> tuple[Path | None, dict]:
    """(GloVe subset file or None, what to record); logs one line either way."""
    if not spec:
        log.info("word vectors: none given (dataset.datamodule.word_vectors=null): models start from random word "
                 "vectors (LEAM: U(-0.001, 0.001)), the stated fallback")
        return None, {"word_vectors": "random (none given)"}
    try:
        source = fetch(str(spec))
    except UserError as err:
        if not standin.enabled():
            raise
        log.warning("dry run: %s; the word vectors start random instead", err)   # the wiring, not the vectors
        return None, {"word_vectors": f"random (dry run: {spec} unavailable)"}
    path, hits = glove_subset(source, vocab, dim, out_dir)
    log.info("word vectors: %d of %d vocabulary words from %s", hits, len(vocab), spec)
    return path, {"word_vectors": str(spec), "word_vectors_found": hits}


