"""NSMC sentiment data: the hub's official split (full profile) or an NSMC-style split built from the raw crawl.

The official NSMC files were sampled from the raw review crawl by a stated rule: ratings 1-4 are negative (0),
9-10 positive (1), reviews shorter than 140 characters, a balanced sample. The exact official subset cannot be
reconstructed from the crawl, so `nsmc_style_split` applies the same rule (plus dropping empty and duplicate
review texts) to build a smaller split of its own; a table that uses it says it is NSMC-*style*, never NSMC.
The split is cached as JSON keyed by its construction parameters and the crawl file's size and mtime.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from langrepr.data.hub import describe, load_hub
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError
from langrepr.utils import write_json_atomic

NEGATIVE_RATINGS = frozenset({1, 2, 3, 4})
POSITIVE_RATINGS = frozenset({9, 10})
REQUIRED_COLUMNS = ("review_id", "rating", "review")
CRAWL_FILE = "nsmc_raw_reviews.tsv.gz"


@dataclass(frozen=True)
class Review:
    """One review of a split (label: 0 negative, 1 positive)."""

    id: str
    text: str
    label: int


def label_of(rating: int) -> int | None:
    """The official rule: 1-4 → 0, 9-10 → 1, 5-8 → not used."""
    return 0 if rating in NEGATIVE_RATINGS else 1 if rating in POSITIVE_RATINGS else None


def read_crawl(path: str | Path, max_chars: int = 140) -> dict[int, list[Review]]:
    """Eligible reviews per label from the raw crawl TSV (gzip'd or plain), deduplicated by review text.

    A file without a rating column, or a row whose rating is not an integer 1-10, is a UserError naming it.
    """
    path = Path(path)
    if not path.exists():
        raise UserError(f"NSMC crawl file {path} does not exist: set LANGREPR_DATA_DIR to a folder holding "
                        f"nsmc/{CRAWL_FILE} (or set the dataset's crawl path)")
    opener = gzip.open if path.suffix == ".gz" else open
    by_label: dict[int, list[Review]] = {0: [], 1: []}
    seen: set[str] = set()
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            if reader.fieldnames is None:
                raise UserError(f"{path} is empty: restore the original crawl")
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{path}: header has no {', '.join(missing)} column(s) (found "
                                f"{reader.fieldnames}): the crawl needs review_id, rating and review columns")
            for row in reader:
                line = reader.line_num
                try:
                    rating = int(row["rating"])
                except (TypeError, ValueError):
                    raise UserError(f"{path} line {line}: rating {row['rating']!r} is not an integer 1-10; "
                                    "fix or drop that row") from None
                if not 1 <= rating <= 10:
                    raise UserError(f"{path} line {line}: rating {rating} is outside 1-10; fix or drop that row")
                text = (row["review"] or "").strip()
                label = label_of(rating)
                if label is None or not text or len(text) >= max_chars or text in seen:
                    continue
                seen.add(text)
                by_label[label].append(Review(row["review_id"], text, label))
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point LANGREPR_DATA_DIR at the original crawl") from None
    except (EOFError, gzip.BadGzipFile) as err:
        raise UserError(f"{path} is a damaged gzip file ({type(err).__name__}): restore the original crawl") from None
    kinds = {0: "negative review (rating 1-4", 1: "positive review (rating 9-10"}
    empty = [label for label, rows in by_label.items() if not rows]
    if len(empty) == 1:   # one class missing: a cut or filtered crawl, which no per_class can fix
        raise UserError(f"{path} has no eligible {kinds[empty[0]]}, under {max_chars} characters): the crawl is cut "
                        "or filtered; restore the original crawl")
    return by_label


def build_split(by_label: dict[int, list[Review]], per_class: int, test_fraction: float, seed: int
                ) -> dict[str, list[Review]]:
    """A balanced sample of `per_class` reviews per label, shuffled with `seed` and cut into train / test."""
    short = {label: len(reviews) for label, reviews in by_label.items() if len(reviews) < per_class}
    if short:
        raise UserError(f"NSMC-style split wants {per_class} reviews per class but the crawl has only {short} "
                        "eligible: lower per_class")
    rng = random.Random(seed)
    sample = [r for label in (0, 1) for r in rng.sample(by_label[label], per_class)]
    rng.shuffle(sample)
    cut = len(sample) - int(round(len(sample) * test_fraction))
    train, test = sample[:cut], sample[cut:]
    if not train or not test:
        raise UserError(f"NSMC-style split of {len(sample)} reviews with test_fraction={test_fraction} leaves an "
                        "empty part: use a test_fraction strictly between 0 and 1")
    return {"train": train, "test": test}


def nsmc_style_split(data_dir: str | Path | None, per_class: int, test_fraction: float = 0.25, seed: int = 1234,
                     max_chars: int = 140, cache_dir: str | Path | None = None, crawl: str | None = None
                     ) -> dict[str, list[Review]]:
    """The NSMC-style split (cached when `cache_dir` is given); see the module docstring."""
    if crawl is None and data_dir is None:
        raise UserError("the NSMC-style split reads the raw crawl: set LANGREPR_DATA_DIR (holding nsmc/) or "
                        "the dataset's crawl path")
    path = Path(crawl) if crawl else Path(data_dir) / "nsmc" / CRAWL_FILE
    cache = None
    if cache_dir is not None and path.exists():
        stat = path.stat()
        key = hashlib.sha256(json.dumps([str(path.resolve()), stat.st_size, stat.st_mtime_ns, per_class,
                                         test_fraction, seed, max_chars]).encode()).hexdigest()[:16]
        cache = Path(cache_dir) / "nsmc_style" / f"{key}.json"
        if cache.exists():
            payload = json.loads(cache.read_text())
            return {part: [Review(*r) for r in rows] for part, rows in payload.items()}
    split = build_split(read_crawl(path, max_chars), per_class, test_fraction, seed)
    if cache is not None:
        write_json_atomic(cache, {part: [[r.id, r.text, r.label] for r in rows] for part, rows in split.items()})
    return split


HUB_ID = "e9t/nsmc"   # a script-only repository: read from its parquet conversion (langrepr.data.hub.SCRIPT_ONLY)


def hub_nsmc(name: str = HUB_ID, max_train: int | None = None, max_test: int | None = None,
             revision: str | None = None, data_dir: str | None = None) -> dict[str, list[Review]]:
    """The official NSMC split from the HF hub (150,000 train / 50,000 test; id, document, label)."""
    try:
        data = load_hub(name, revision=revision, data_dir=data_dir)
    except Exception as err:  # offline, renamed dataset, ...: one actionable line
        raise UserError(f"could not load {describe(name, None, revision, data_dir)} from the Hugging Face Hub "
                        f"({type(err).__name__}): go online once, or use source=crawl with the local raw crawl"
                        ) from None
    out = {}
    for part, limit in (("train", max_train), ("test", max_test)):
        rows = data[part]
        rows = rows.select(range(min(limit, len(rows)))) if limit else rows
        ids, documents, labels = rows["id"], rows["document"], rows["label"]   # each column read once
        out[part] = [Review(str(i), (d or "").strip(), int(y)) for i, d, y in zip(ids, documents, labels)]
    return out


def load_nsmc(source: str, data_dir: str | None = None, per_class: int = 2000, test_fraction: float = 0.25,
              seed: int = 1234, max_chars: int = 140, cache_dir: str | None = None, crawl: str | None = None,
              hub_name: str = HUB_ID, max_train: int | None = None, max_test: int | None = None,
              hub_revision: str | None = None, hub_data_dir: str | None = None
              ) -> dict[str, list[Review]]:
    """`source`: crawl (an NSMC-style split built here) | hub (the official split; `hub_*` as langrepr.data.hub)."""
    if source == "crawl":
        return nsmc_style_split(data_dir, per_class, test_fraction, seed, max_chars, cache_dir, crawl)
    if source == "hub":
        return hub_nsmc(hub_name, max_train, max_test, hub_revision, hub_data_dir)
    raise UserError(f"unknown NSMC source '{source}': use crawl (NSMC-style split) or hub (official)")
