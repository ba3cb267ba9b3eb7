"""One reader for CoNLL-style column files (CoNLL-2003 NER, UD CoNLL-U).

Blank lines end sentences, each other line is one token row; what a row means (skipped, malformed, or a (token, tag) pair) is the caller's ``parse_row``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

Sentences = list[tuple[list[str], list[str]]]


def read_column_sentences(path: Path, parse_row: Callable[[str, int], tuple[str, str] | None],
                          tag_column_name: str) -> Sentences:
    """Sentences of (tokens, tags) of a column file.

    ``parse_row(line, lineno)`` gets each non-blank line without its newline and
    gives (token, tag), None to skip the line, or raises a UserError naming it. A file with no sentence, or with one
    tag on every token of several sentences (the ``tag_column_name`` column missing or the file cut), is a UserError.
    """
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
                row = parse_row(line, lineno)
                if row is None:
                    continue
                tokens.append(row[0])
                tags.append(row[1])
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point LANGREPR_DATA_DIR at the original release") from None
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise UserError(f"{path} holds no sentences: check the file (empty split)")
    found = {t for _, sentence_tags in sentences for t in sentence_tags}
    if len(sentences) > 1 and len(found) == 1:
        raise UserError(f"{path}: every token of its {len(sentences)} sentences has the tag {found.pop()!r}: the "
                        f"{tag_column_name} column is missing or the file is cut; point LANGREPR_DATA_DIR at the "
                        "original release")
    return sentences
