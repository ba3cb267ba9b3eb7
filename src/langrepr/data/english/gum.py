"""UD English GUM (Zeldes 2017) UPOS tags as token/tag sentences, for the Bit Cipher POS probe.

Files ``en_gum-ud-{train,dev,test}.conllu`` under ``<data_dir>/ud_english_gum/<release>`` (default r2.5). Comment
lines are skipped; multi-word token ranges (``1-2``) and empty nodes (``1.1``) are skipped so each row is one
syntactic word with its UPOS (column 4).
"""

from __future__ import annotations

from pathlib import Path

from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError


def read_conllu(path: str | Path) -> list[tuple[list[str], list[str]]]:
    """Sentences of (forms, UPOS tags); a line without 10 tab-separated columns is a UserError with its number."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} not found: set LANGREPR_DATA_DIR to a folder holding ud_english_gum/<release>/")
    sentences, tokens, tags = [], [], []
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\n")
                if not line.strip():
                    if tokens:
                        sentences.append((tokens, tags))
                    tokens, tags = [], []
                    continue
                if line.startswith("#"):
                    continue
                cols = line.split("\t")
                if len(cols) != 10:
                    raise UserError(f"{path}:{lineno}: malformed CoNLL-U line (expected 10 tab-separated columns, "
                                    f"got {len(cols)})")
                if "-" in cols[0] or "." in cols[0]:
                    continue
                tokens.append(cols[1])
                tags.append(cols[3])
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point LANGREPR_DATA_DIR at the original release") from None
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise UserError(f"{path} holds no sentences: check the file (empty split)")
    found = {t for _, sentence_tags in sentences for t in sentence_tags}
    if len(sentences) > 1 and len(found) == 1:
        raise UserError(f"{path}: every token of its {len(sentences)} sentences has the tag {found.pop()!r}: the "
                        "UPOS column is missing or the file is cut; point LANGREPR_DATA_DIR at the original release")
    return sentences


def gum_splits(data_dir: str | Path, release: str = "r2.5") -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/dev/test UPOS sentences of GUM from ``<data_dir>/ud_english_gum/<release>``."""
    if data_dir is None:
        raise UserError("set LANGREPR_DATA_DIR to a folder holding ud_english_gum/<release>/en_gum-ud-*.conllu")
    root = Path(data_dir) / "ud_english_gum" / release
    return {split: read_conllu(root / f"en_gum-ud-{split}.conllu") for split in ("train", "dev", "test")}
