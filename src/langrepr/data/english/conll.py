"""CoNLL-2003 English NER (Tjong Kim Sang & De Meulder 2003) as token/tag sentences, for the Bit Cipher probe.

Files: ``eng.train`` / ``eng.testa`` (dev) / ``eng.testb`` (test) under ``<data_dir>/conll2003``; each line is
``word POS chunk NER`` (IOB1 tags, as distributed), blank lines end sentences, ``-DOCSTART-`` lines are skipped.
"""

from __future__ import annotations

from pathlib import Path

from langrepr.data.english.columns import read_column_sentences
from langrepr.errors import UserError

CONLL_FILES = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}


def read_conll(path: str | Path, tag_column: int = -1) -> list[tuple[list[str], list[str]]]:
    """Sentences of (tokens, tags) from a CoNLL column file; a malformed line is a UserError naming its line."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} not found: set LANGREPR_DATA_DIR to a folder holding conll2003/{path.name}")

    def parse_row(line: str, lineno: int) -> tuple[str, str] | None:
        line = line.strip()
        if line.startswith("-DOCSTART-"):
            return None
        parts = line.split()
        if len(parts) < 2:
            raise UserError(f"{path}:{lineno}: malformed line {line[:40]!r}: expected 'word ... TAG' columns")
        return parts[0], parts[tag_column]

    return read_column_sentences(path, parse_row, "NER")


def conll2003_splits(data_dir: str | Path) -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/dev/test sentences of CoNLL-2003 NER from ``<data_dir>/conll2003``."""
    if data_dir is None:
        raise UserError("this reader needs the CoNLL-2003 files as distributed (IOB1 tags; the hub copy "
                        f"{HUB_ID} is re-tagged IOB2 and is read by the grid's datamodule only): set "
                        "LANGREPR_DATA_DIR to a folder holding conll2003/eng.{train,testa,testb}")
    root = Path(data_dir) / "conll2003"
    return {split: read_conll(root / name) for split, name in CONLL_FILES.items()}


HUB_ID = "eriktks/conll2003"          # the hub's copy (IOB2 tags as integer ids; script-only: its parquet branch)
HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 (CoNLL-2003 as distributed) -> IOB2 (BIO: every entity starts with B-).

    IOB1 writes B- only between two adjacent entities of one type: an I- tag that does not continue an entity of
    its own type starts one.
    """
    out: list[str] = []
    for tag in tags:
        if tag.startswith("I-") and (not out or out[-1] == "O" or out[-1][2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


def conll2003_hub(cache_dir: str | None = None, revision: str | None = "refs/convert/parquet",
                  data_dir: str | None = "conll2003") -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/dev/test sentences of CoNLL-2003 from the HF hub (`eriktks/conll2003`, tags already IOB2)."""
    from langrepr.data.hub import describe, load_hub

    try:
        data = load_hub(HUB_ID, revision=revision, data_dir=data_dir, cache_dir=cache_dir)
    except Exception as err:  # noqa: BLE001  (hub / network errors of several libraries: one line)
        raise UserError(f"CoNLL-2003 could not be read from the hub ({describe(HUB_ID, None, revision, data_dir)}: "
                        f"{' '.join(str(err).split())[:160]}): set LANGREPR_DATA_DIR to a folder holding "
                        "conll2003/eng.{train,testa,testb}") from None
    names = data["train"].features["ner_tags"].feature.names
    return {split: [(list(row["tokens"]), [names[i] for i in row["ner_tags"]]) for row in data[hub]]
            for split, hub in HUB_SPLITS.items()}
