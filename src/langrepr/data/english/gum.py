"""UD English GUM (Zeldes 2017) UPOS tags as token/tag sentences, for the Bit Cipher POS probe.

Files ``en_gum-ud-{train,dev,test}.conllu`` under ``<data_dir>/ud_english_gum/<release>`` (default r2.5). Comment
lines are skipped; multi-word token ranges (``1-2``) and empty nodes (``1.1``) are skipped so each row is one
syntactic word with its UPOS (column 4).
"""

from __future__ import annotations

from pathlib import Path

from langrepr.data.english.columns import read_column_sentences
from langrepr.errors import UserError


def read_conllu(path: str | Path) -> list[tuple[list[str], list[str]]]:
    """Sentences of (forms, UPOS tags); a line without 10 tab-separated columns is a UserError with its number."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} not found: set LANGREPR_DATA_DIR to a folder holding ud_english_gum/<release>/")

    def parse_row(line: str, lineno: int) -> tuple[str, str] | None:
        if line.startswith("#"):
            return None
        cols = line.split("\t")
        if len(cols) != 10:
            raise UserError(f"{path}:{lineno}: malformed CoNLL-U line (expected 10 tab-separated columns, "
                            f"got {len(cols)})")
        if "-" in cols[0] or "." in cols[0]:
            return None
        return cols[1], cols[3]

    return read_column_sentences(path, parse_row, "UPOS")


def gum_splits(data_dir: str | Path, release: str = "r2.5") -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/dev/test UPOS sentences of GUM from ``<data_dir>/ud_english_gum/<release>``."""
    if data_dir is None:
        raise UserError("set LANGREPR_DATA_DIR to a folder holding ud_english_gum/<release>/en_gum-ud-*.conllu")
    root = Path(data_dir) / "ud_english_gum" / release
    return {split: read_conllu(root / f"en_gum-ud-{split}.conllu") for split in ("train", "dev", "test")}
