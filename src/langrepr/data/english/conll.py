"""CoNLL-2003 English NER (Tjong Kim Sang & De Meulder 2003) as token/tag sentences, for the Bit Cipher probe.

Files: ``eng.train`` / ``eng.testa`` (dev) / ``eng.testb`` (test) under ``<data_dir>/conll2003``; each line is
``word POS chunk NER`` (IOB1 tags, as distributed), blank lines end sentences, ``-DOCSTART-`` lines are skipped.
"""

from __future__ import annotations

from pathlib import Path

from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

CONLL_FILES = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}


def read_conll(path: str | Path, tag_column: int = -1) -> list[tuple[list[str], list[str]]]:
    """Sentences of (tokens, tags) from a CoNLL column file; a malformed line is a UserError naming its line."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} not found: set LANGREPR_DATA_DIR to a folder holding conll2003/{path.name}")
    sentences, tokens, tags = [], [], []
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    if tokens:
                        sentences.append((tokens, tags))
                    tokens, tags = [], []
                    continue
                if line.startswith("-DOCSTART-"):
                    continue
                parts = line.split()
                if len(parts) < 2:
                    raise UserError(f"{path}:{lineno}: malformed line {line[:40]!r}: expected 'word ... TAG' columns")
                tokens.append(parts[0])
                tags.append(parts[tag_column])
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point LANGREPR_DATA_DIR at the original release") from None
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise UserError(f"{path} holds no sentences: check the file (empty split)")
    found = {t for _, sentence_tags in sentences for t in sentence_tags}
    if len(sentences) > 1 and len(found) == 1:
        raise UserError(f"{path}: every token of its {len(sentences)} sentences has the tag {found.pop()!r}: the "
                        "NER column is missing or the file is cut; point LANGREPR_DATA_DIR at the original release")
    return sentences


def conll2003_splits(data_dir: str | Path) -> dict[str, list[tuple[list[str], list[str]]]]:
    """train/dev/test sentences of CoNLL-2003 NER from ``<data_dir>/conll2003``."""
    if data_dir is None:
        raise UserError("CoNLL-2003 is not on the HF hub in its original form here: set LANGREPR_DATA_DIR to a "
                        "folder holding conll2003/eng.{train,testa,testb}")
    root = Path(data_dir) / "conll2003"
    return {split: read_conll(root / name) for split, name in CONLL_FILES.items()}
