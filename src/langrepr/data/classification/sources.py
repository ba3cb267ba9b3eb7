"""Where the LEAM data sets come from: the Zhang et al. (2015) CSVs, HF `datasets`, MIMIC-III 50.

Every reader returns ``{split: (texts, labels)}`` with 0-based integer labels (single-label) or
lists of label indices (multi-label), so the datamodule never sees a file format.

- HF hub (default, online): the Zhang et al. splits as published on the hub (``HF_IDS``).
- Local Zhang CSVs (``data_dir``): ``train.csv`` / ``test.csv``, no header, first column the 1-based
  class, then the text fields (AG News: title, description; DBpedia: title, content; Yahoo: title,
  question, answer; Yelp: review). Fields are joined with a space; a backslash-n escape becomes a space.
- NSMC (Korean movie-review sentiment, beyond the paper: LEAM as a reference on the Korean data): through
  `langrepr.data.korean.nsmc.load_nsmc`, the same reader (and the same split) as the multi-hot LM's NSMC
  cells: the NSMC-style split built from the local raw crawl, or the official split from the hub.
- MIMIC-III, 50 codes (Mullenbach et al. 2018, licence-gated, local only): ``train_50.csv``,
  ``dev_50.csv``, ``test_50.csv`` with columns SUBJECT_ID, HADM_ID, TEXT, LABELS (codes joined by
  ';'), length; the label set is ``TOP_50_CODES.csv`` when present, else the codes seen in train.
"""

from __future__ import annotations

import csv
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from langrepr.data import standin
from langrepr.data.hub import load_hub
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

# hub ids of the Zhang et al. (2015) splits, with the text columns joined in file order
HF_IDS = {
    "ag_news": ("fancyzhx/ag_news", ["text"]),
    "yelp_polarity": ("fancyzhx/yelp_polarity", ["text"]),
    "yelp_full": ("Yelp/yelp_review_full", ["text"]),
    "dbpedia": ("fancyzhx/dbpedia_14", ["title", "content"]),
    "yahoo": ("community-datasets/yahoo_answers_topics", ["question_title", "question_content", "best_answer"]),
}
LABEL_COLUMNS = {"yahoo": "topic"}

Splits = dict[str, tuple[list[str], list]]
log = logging.getLogger(__name__)


def read_zhang_csv(path: str | Path, num_classes: int | None = None) -> tuple[list[str], list[int]]:
    """One Zhang-format CSV: (texts, 0-based labels); a malformed row names its line.

    Every row must have as many fields as the first (the data set's columns) and, when `num_classes` is given
    (the configured class names), a class index 1..num_classes.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist: point dataset.datamodule.data_dir at a folder with the Zhang et al. CSVs")
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        texts, labels = _zhang_rows(path, num_classes, strict=True)
    except csv.Error as err:
        if "unexpected end of data" in str(err):   # the file ends inside a quoted field: cut short (a partial copy)
            raise UserError(f"{path} ends inside a quoted field (after line {err.line}): the file is cut short; "
                            "restore the whole CSV or point dataset.datamodule.data_dir at the original CSVs") from None
        texts, labels = _zhang_rows(path, num_classes, strict=False)   # other quoting slips: read as csv always has
    if not texts:
        raise UserError(f"{path} is empty: it must hold one labelled row per line")
    if not any(t.strip() for t in texts):
        raise UserError(f"{path}: every one of its {len(texts)} rows has empty text fields (only the class column "
                        "is filled): the text columns were lost; restore the original CSV")
    return texts, labels


def _zhang_rows(path: Path, num_classes: int | None, strict: bool) -> tuple[list[str], list[int]]:
    """The rows of one Zhang CSV; a csv.Error carries the line it stopped at (`err.line`)."""
    texts, labels, width = [], [], None
    try:
        # utf-8-sig: a byte-order mark (a CSV saved by Excel) is not part of the first class index
        with path.open(newline="", encoding="utf-8-sig") as f:
            for n, row in enumerate(_rows_naming_their_line(csv.reader(f, strict=strict)), 1):
                if not row:
                    continue                              # a blank line (e.g. at the end of an edited file)
                if len(row) < 2 or not row[0].strip().isdigit() or int(row[0]) < 1:
                    header = (" (tab-separated? the Zhang et al. files are comma-separated, quoted CSV)"
                              if "\t" in row[0] else
                              " (a header line? the Zhang et al. files have none: delete it)" if n == 1 else "")
                    raise UserError(f"{path}:{n} is not a Zhang et al. row (class index >= 1, then text fields): "
                                    f"{row[:2]!r}{header}")
                width = width or len(row)
                if len(row) != width:
                    raise UserError(f"{path}:{n} has {len(row)} fields where line 1 has {width}: a wrong column "
                                    "count (an unquoted comma?); fix that row")
                if num_classes is not None and int(row[0]) > num_classes:
                    raise UserError(f"{path}:{n} has class {int(row[0])} but the data set has {num_classes} classes "
                                    "(dataset.datamodule.class_names): fix or drop that row")
                labels.append(int(row[0]) - 1)
                texts.append(" ".join(field.replace("\\n", " ").strip() for field in row[1:]))
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point dataset.datamodule.data_dir at the original CSVs") from None
    return texts, labels


def _rows_naming_their_line(reader) -> Iterator[list[str]]:
    """The reader's rows, streamed; a csv.Error carries the line the reader stopped at (`err.line`)."""
    try:
        yield from reader
    except csv.Error as err:
        err.line = reader.line_num
        raise


def stratified_split(labels: list, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (rest, held_out): `fraction` of every class held out, classes kept in proportion."""
    if not 0.0 < fraction < 1.0:
        raise UserError(f"a split fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    labels_arr = np.asarray([lab if isinstance(lab, int) else -1 for lab in labels])
    rest, held = [], []
    for cls in np.unique(labels_arr):
        idx = rng.permutation(np.flatnonzero(labels_arr == cls))
        n_held = int(round(fraction * len(idx)))
        held.append(idx[:n_held])
        rest.append(idx[n_held:])
    return np.sort(np.concatenate(rest)), np.sort(np.concatenate(held))


def read_local(data_dir: str | Path, split_test_fraction: float | None, split_seed: int,
               num_classes: int | None = None) -> tuple[Splits, dict]:
    """train/test from a local Zhang folder; with only test.csv, split it (stated in the returned info)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise UserError(f"data folder {data_dir} does not exist: set dataset.datamodule.data_dir (or LANGREPR_DATA_DIR)")
    has_train = (data_dir / "train.csv").is_file()
    if split_test_fraction is None:
        if not has_train:
            raise UserError(f"{data_dir} has no train.csv: give the full Zhang folder, or set "
                            "dataset.datamodule.split_test_fraction to split test.csv into train and test")
        splits = {"train": read_zhang_csv(data_dir / "train.csv", num_classes),
                  "test": read_zhang_csv(data_dir / "test.csv", num_classes)}
        return splits, {"source": str(data_dir), "split": "official train/test"}
    texts, labels = read_zhang_csv(data_dir / "test.csv", num_classes)
    # a row repeated in the file would land on both sides of the cut and score a memorised test row: each
    # (class, text) is kept once (the shared AG News test file has no repeats, so its split is unchanged)
    first = {}
    for i, key in enumerate(zip(labels, texts)):
        first.setdefault(key, i)
    dropped = len(texts) - len(first)
    if dropped:
        keep = sorted(first.values())
        texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
        log.warning("%s: %d repeated row(s) dropped before cutting it into train and test", data_dir / "test.csv",
                    dropped)
    train_idx, test_idx = stratified_split(labels, split_test_fraction, split_seed)
    pick = lambda idx: ([texts[i] for i in idx], [labels[i] for i in idx])  # noqa: E731
    info = {"source": str(data_dir / "test.csv"),
            "split": f"the official TEST split cut in two here: {len(train_idx)} train / {len(test_idx)} test "
                     f"(stratified, split_seed={split_seed}); not the official train split",
            "duplicate_rows_dropped": dropped}
    return {"train": pick(train_idx), "test": pick(test_idx)}, info


def read_hub(name: str, cache_dir: str | None = None) -> tuple[Splits, dict]:
    """The Zhang et al. splits from the HF hub (needs internet the first time)."""
    if name not in HF_IDS:
        raise UserError(f"no hub source for data set {name!r}: choose one of {', '.join(HF_IDS)} or give data_dir")
    hub_id, columns = HF_IDS[name]
    label_column = LABEL_COLUMNS.get(name, "label")
    try:
        ds = load_hub(hub_id, cache_dir=cache_dir)
    except Exception as err:  # offline, renamed dataset, ...: one line that says what to do
        raise UserError(f"could not load {hub_id} from the HF hub ({type(err).__name__}): go online once, or set "
                        "dataset.datamodule.data_dir to a local copy of the Zhang et al. CSVs") from None
    splits = {}
    for split in ("train", "test"):
        part = ds[split]
        fields = [part[c] for c in columns]     # each column read once (part[c][i] would re-read it per row)
        texts = [" ".join(str(v or "") for v in row) for row in zip(*fields)]
        splits[split] = (texts, [int(x) for x in part[label_column]])
    return splits, {"source": f"hf:{hub_id}", "split": "official train/test"}


def read_nsmc(data_dir: str | Path | None, cache_dir: str | None = None, **options) -> tuple[Splits, dict]:
    """NSMC as (texts, 0/1 labels): `options` are `load_nsmc`'s (source, per_class, test_fraction, seed, max_chars)."""
    from langrepr.data.korean.nsmc import load_nsmc

    options = {"source": "crawl", **options}
    source = options["source"]
    split = load_nsmc(data_dir=str(data_dir) if data_dir else None, cache_dir=cache_dir, **options)
    splits = {part: ([r.text for r in rows], [r.label for r in rows]) for part, rows in split.items()}
    what = ("an NSMC-STYLE split built here from the raw crawl (not the official split): "
            f"{len(split['train'])} train / {len(split['test'])} test") if source == "crawl" else "official train/test"
    return splits, {"source": "nsmc crawl" if source == "crawl" else f"hf:{options.get('hub_name', 'e9t/nsmc')}",
                    "split": what}


def read_mimic50(data_dir: str | Path, cache_dir: str | None = None) -> tuple[Splits, dict, list[str]]:
    """MIMIC-III top-50 codes in the Mullenbach et al. (2018) files; returns splits, info and the code list.

    In a dry run without the files (`langrepr.data.standin`), a generated stand-in in their format (50 codes).
    """
    data_dir = Path(data_dir) if data_dir else None
    note = None
    if (data_dir is None or not (data_dir / "train_50.csv").is_file()) and standin.enabled():
        note = (f"dry run: no MIMIC-III 50-code files in {data_dir}; a generated stand-in in their format with "
                f"{standin.MIMIC_CODES} codes, not data")
        log.warning("%s", note)
        data_dir = standin.mimic50_files(Path(cache_dir) if cache_dir else Path("outputs") / "cache" / "classification")
    if data_dir is None or not (data_dir / "train_50.csv").is_file():
        raise UserError(f"MIMIC-III 50-code files not found in {data_dir}: MIMIC-III is licence-gated (PhysioNet); "
                        "build train_50.csv/dev_50.csv/test_50.csv with the CAML scripts and set data_dir")
    rows = {}
    for split, fname in (("train", "train_50.csv"), ("val", "dev_50.csv"), ("test", "test_50.csv")):
        try:
            with (data_dir / fname).open(newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                if not {"TEXT", "LABELS"} <= set(reader.fieldnames or []):
                    raise UserError(f"{data_dir / fname} needs the columns TEXT and LABELS (Mullenbach et al. format)")
                rows[split] = [(r["TEXT"], [c for c in (r["LABELS"] or "").split(";") if c]) for r in reader]
        except UnicodeDecodeError as err:
            raise not_utf8(data_dir / fname, err, "rebuild it with the CAML scripts") from None
        except FileNotFoundError:
            raise UserError(f"{data_dir / fname} does not exist: build train_50.csv/dev_50.csv/test_50.csv with the "
                            "CAML scripts into one folder") from None
    top = data_dir / "TOP_50_CODES.csv"
    if top.is_file():
        codes = [line.strip() for line in top.read_text().splitlines() if line.strip()]
    else:
        codes = sorted({c for _, cs in rows["train"] for c in cs})
    index = {c: i for i, c in enumerate(codes)}
    splits = {s: ([t for t, _ in r], [[index[c] for c in cs if c in index] for _, cs in r]) for s, r in rows.items()}
    info = {"source": str(data_dir), "split": "Mullenbach et al. 50-code train/dev/test", **({"standin": note} if note else {})}
    return splits, info, codes
