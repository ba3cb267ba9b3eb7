"""Korean pretraining corpora as lists of sentences: local NSMC / KorQuAD / KLUE text, NIKL MODU, or the hub.

The quick corpus never contains the text of a quick test split: NSMC reviews rated 5-8 only (the NSMC
construction rule keeps 1-4 and 9-10, so an NSMC-style split never overlaps them), KorQuAD paragraphs of the
train part only, and the KLUE NLI/STS dev sentences (KLUE NER, a stand-in test set, is not used).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

from langrepr.data.korean.korquad import train_part_contexts
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
NEUTRAL_RATINGS = {5, 6, 7, 8}


def require(path: Path, what: str) -> Path:
    if not path.exists():
        raise UserError(f"{what} {path} does not exist: set LANGREPR_DATA_DIR (or the config path) to a folder "
                        "that holds it")
    return path


def nsmc_neutral_reviews(data_dir: str | Path, limit: int) -> list[str]:
    """Up to `limit` raw NSMC reviews rated 5-8, in file order (outside every NSMC-style split)."""
    path = require(Path(data_dir) / "nsmc" / "nsmc_raw_reviews.tsv.gz", "NSMC raw review file")
    out = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            missing = [c for c in ("rating", "review") if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{path}: header has no {', '.join(missing)} column(s) (found {reader.fieldnames}): "
                                "the NSMC crawl needs rating and review columns")
            for row in reader:
                text = (row.get("review") or "").strip()
                try:
                    rating = int(row["rating"])
                except (TypeError, ValueError):
                    raise UserError(f"{path} line {reader.line_num}: rating {row['rating']!r} is not an integer "
                                    "1-10; fix or drop that row") from None
                if text and rating in NEUTRAL_RATINGS:
                    out.append(text)
                    if len(out) >= limit:
                        break
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point LANGREPR_DATA_DIR at the original crawl") from None
    except (EOFError, gzip.BadGzipFile) as err:
        raise UserError(f"{path} is a damaged gzip file ({type(err).__name__}): restore the original crawl") from None
    return out


def klue_sentences(data_dir: str | Path, limit: int) -> list[str]:
    """KLUE NLI premises/hypotheses and STS sentence pairs (dev files), deduplicated."""
    seen: dict[str, None] = {}
    for name, what, fields in (("klue-nli-v1.1_dev.json", "KLUE NLI file", ("premise", "hypothesis")),
                               ("klue-sts-v1.1_dev.json", "KLUE STS file", ("sentence1", "sentence2"))):
        path = require(Path(data_dir) / "klue" / name, what)
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
            for row in rows:
                for field in fields:
                    seen.setdefault(row[field].strip(), None)
        except UnicodeDecodeError as err:
            raise not_utf8(path, err, "restore the original KLUE release") from None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise UserError(f"{path} is not the KLUE {what.split()[1]} dev JSON (a list of records with "
                            f"{' and '.join(fields)}; {type(err).__name__}: {' '.join(str(err).split())[:80]}): "
                            "restore the original KLUE release") from None
    return [s for s in seen if s][:limit]


def split_sentences(paragraphs: list[str]) -> list[str]:
    return [s.strip() for p in paragraphs for s in SENTENCE_END.split(p) if s.strip()]


def text_file_sentences(path: str | Path, limit: int) -> list[str]:
    """One sentence per line from a local text file (e.g. NIKL MODU newspaper text exported to lines)."""
    path = require(Path(path), "corpus file")
    out = []
    try:
        with open(path, encoding="utf-8-sig") as fh:   # a byte-order mark is not part of the first sentence
            for line in fh:
                if line.strip():
                    out.extend(split_sentences([line]))
                if len(out) >= limit:
                    break
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point dataset.corpus.path at a UTF-8 export of the corpus") from None
    return out[:limit]


def quick_corpus(data_dir: str | None, nsmc: int = 20000, korquad: int = 20000, klue: int = 8000,
                 korquad_test_fraction: float = 0.3) -> list[str]:
    """The quick profile's real Korean sentences (see the module docstring for what is left out and why)."""
    if data_dir is None:
        raise UserError("the quick Korean corpus reads local copies: set LANGREPR_DATA_DIR to a folder laid out "
                        "like the project's shared data (nsmc/, korquad1/, klue/)")
    sentences = nsmc_neutral_reviews(data_dir, nsmc) if nsmc else []
    if korquad:
        sentences += split_sentences(train_part_contexts(data_dir, korquad_test_fraction))[:korquad]
    if klue:
        sentences += klue_sentences(data_dir, klue)
    if not sentences:
        raise UserError("the quick Korean corpus came out empty: raise nsmc/korquad/klue sizes above 0")
    return sentences


def build_corpus(source: str, data_dir: str | None = None, path: str | None = None, limit: int = 10_000_000,
                 **quick_sizes) -> list[str]:
    """Sentences of a corpus `source`.

    quick = local NSMC/KorQuAD/KLUE; text = one sentence per line at `path` (e.g. NIKL MODU exported);
    hub:<name> = a hub data set with a `text` column.
    """
    if source == "quick":
        return quick_corpus(data_dir, **quick_sizes)
    if source == "text":
        if not path:
            raise UserError("corpus source 'text' needs corpus.path: a UTF-8 file with one sentence per line")
        sentences = text_file_sentences(path, limit)
    elif source.startswith("hub:"):
        from langrepr.data.hub import load_hub

        sentences = split_sentences(load_hub(source[4:], split="train")["text"][:limit])
    else:
        raise UserError(f"unknown corpus source '{source}': use quick, text or hub:<dataset>")
    if not sentences:
        raise UserError(f"corpus '{source}' is empty: point it at a file with at least one non-empty line")
    return sentences
