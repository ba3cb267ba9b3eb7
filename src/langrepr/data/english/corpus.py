"""Raw English text as a stream of documents, and the paper's tokenisation (spaCy rule-based, lower-cased).

Bit Cipher §3.5 trains on CommonCrawl text "tokenised with standard spaCy tokenization, lowercase only". Sources:

- ``{path: ptb/ptb.train.txt, format: lines}``: one document per line of a local file (``.gz`` read too),
  relative to ``data_dir`` (``$LANGREPR_DATA_DIR``);
- ``{path: agnews/test.csv, format: csv, text_columns: [1, 2]}``: one document per CSV row;
- ``{path: conll2003/eng.train, format: conll}`` / ``{..., format: conllu}``: one document per sentence of a
  tagged file (its words only; never use the probes' dev/test files here);
- ``{hf: <dataset>, config: ..., split: train, text_field: text}``: a Hugging Face dataset read in streaming
  mode (the full profile's CommonCrawl-derived text; needs network access).

Documents matter twice: windows never cross a document boundary, and document frequency (β = d/f) counts
documents. ``max_tokens`` truncates the stream (whitespace-token estimate) for the data-size grid.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

FORMATS = ("lines", "csv", "conll", "conllu")


def spacy_tokenizer() -> Any:
    """The rule-based English tokenizer of spaCy (`spacy.blank("en")`, no model download); PTB's `<unk>` kept whole."""
    import spacy
    from spacy.symbols import ORTH

    nlp = spacy.blank("en")
    nlp.tokenizer.add_special_case("<unk>", [{ORTH: "<unk>"}])
    return nlp.tokenizer


def tokenize_documents(texts: Sequence[str], lowercase: bool = True, tokenizer: Any = None) -> list[list[str]]:
    """The spaCy tokens of each text (whitespace tokens dropped), lower-cased as in the paper."""
    tokenizer = tokenizer or spacy_tokenizer()
    out = []
    for doc in tokenizer.pipe(texts, batch_size=1000):
        words = [t.text for t in doc if not t.is_space]
        out.append([w.lower() for w in words] if lowercase else words)
    return out


def _open_text(path: Path) -> io.TextIOBase:
    if not path.exists():
        raise UserError(f"corpus file {path} not found: check the corpus sources and LANGREPR_DATA_DIR")
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def _local_documents(path: Path, source: dict) -> Iterator[str]:
    fmt = source.get("format", "lines")
    given = 0
    try:
        if fmt == "lines":
            with _open_text(path) as fh:
                for line in fh:
                    if line.strip():
                        given += 1
                        yield line.strip()
        elif fmt == "csv":
            for doc in _csv_documents(path, list(source.get("text_columns", [0]))):
                given += 1
                yield doc
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "drop it from bitcipher.corpus.sources") from None
    except (EOFError, gzip.BadGzipFile) as err:
        raise UserError(f"{path} is a damaged gzip file ({type(err).__name__}): re-download it or drop it from "
                        "bitcipher.corpus.sources") from None
    if fmt in ("lines", "csv"):
        if not given:   # read to its end and nothing in it: the other sources would hide a lost file
            raise UserError(f"corpus source {path} holds no text (empty, or every line blank): restore it or drop it "
                            "from bitcipher.corpus.sources")
        return
    if fmt in ("conll", "conllu"):
        from langrepr.data.english.conll import read_conll
        from langrepr.data.english.gum import read_conllu

        for tokens, _ in (read_conll(path) if fmt == "conll" else read_conllu(path)):
            yield " ".join(tokens)
    else:
        raise UserError(f"unknown corpus format '{fmt}' for {path}: choose one of {', '.join(FORMATS)}")


def _csv_documents(path: Path, columns: list[int]) -> Iterator[str]:
    """One document per CSV row: its `text_columns` joined; a file with fewer columns than asked is an error."""
    with _open_text(path) as fh:
        for number, row in enumerate(csv.reader(fh), 1):
            if row and max(columns) >= len(row):
                raise UserError(f"{path} line {number} has {len(row)} column(s) but the corpus source reads "
                                f"text_columns {columns}: fix the source's text_columns or the file")
            text = " ".join(row[c] for c in columns if c < len(row)).replace("\\", " ")
            if text.strip():
                yield text


def _hub_documents(source: dict) -> Iterator[str]:
    from langrepr.data.hub import load_hub

    try:   # `revision` / `data_dir`: as langrepr.data.hub (a script-only repository's parquet branch)
        stream = load_hub(source["hf"], source.get("config"), revision=source.get("revision"),
                          data_dir=source.get("data_dir"), split=source.get("split", "train"), streaming=True)
    except Exception as err:  # offline, renamed dataset, ...: one actionable line
        raise UserError(f"could not stream {source['hf']} ({type(err).__name__}): check network access, or use "
                        "local corpus sources (profile=quick)") from err
    field = source.get("text_field", "text")
    for record in stream:
        if record.get(field, "").strip():
            yield record[field]


def iter_documents(sources: Iterable[dict], data_dir: str | Path | None) -> Iterator[str]:
    """The documents of every source, in order."""
    for source in sources:
        source = dict(source)
        if "hf" in source:
            yield from _hub_documents(source)
            continue
        if data_dir is None:
            raise UserError(f"corpus source {source.get('path')} is a local file but LANGREPR_DATA_DIR is not set: "
                            "set it to a folder laid out like shared/data")
        yield from _local_documents(Path(data_dir) / source["path"], source)


def text_shards(documents: Iterable[str], shard_tokens: int, max_tokens: int | None = None) -> Iterator[list[str]]:
    """Group documents into shards of about `shard_tokens` whitespace tokens; stop after `max_tokens`."""
    if shard_tokens < 1:
        raise UserError(f"shard_tokens={shard_tokens}: must be a positive number of tokens")
    shard: list[str] = []
    size = total = 0
    for doc in documents:
        n = len(doc.split())
        if max_tokens is not None and total + n > max_tokens:
            break
        shard.append(doc)
        size += n
        total += n
        if size >= shard_tokens:
            yield shard
            shard, size = [], 0
    if shard:
        yield shard
