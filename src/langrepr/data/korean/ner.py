"""Korean NER as labelled character spans, aligned to morphemes as BIO tags (multi-hot LM §3.2).

Readers return `TaggedSentence`s (raw text + `(start, end, type)` character spans):
- `read_klue_ner`: KLUE-NER's TSV (one "char<TAB>BIO-tag" per line, sentences split by blank lines, each
  preceded by a "## guid<TAB>marked-up sentence" line). Its PS/LC/OG are shown as PER/LOC/ORG (`KLUE_TYPES`).
- `read_modu_ner`: the NIKL MODU NER corpus as released (JSON: document → sentence → `form` and `NE` items
  with `label`, `begin`, `end`); a label's top-level type is its first two letters (PS_NAME → PS, LCP_… → LC),
  giving the 15 TTA types of `MODU_TYPES` (PS/LC/OG shown as PER/LOC/ORG here too).

`morpheme_tags` turns the spans into one BIO tag per morpheme from the analyser's character offsets: a morpheme
is inside a span when its characters overlap it; the first such morpheme is B-. A malformed line or a tag outside
the tag set is a UserError naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

KLUE_TYPES = {"PS": "PER", "LC": "LOC", "OG": "ORG", "DT": "DT", "TI": "TI", "QT": "QT"}
MODU_TYPES = ("PS", "LC", "OG", "AF", "DT", "TI", "CV", "AM", "PT", "QT", "FD", "TR", "EV", "MT", "TM")
SHOWN_AS = {"PS": "PER", "LC": "LOC", "OG": "ORG"}   # Table 5's names; the other types keep their own
OUTSIDE = "O"


@dataclass
class TaggedSentence:
    """Raw text and its labelled character spans [start, end); `predicate` is set for SRL (its character span)."""

    id: str
    text: str
    spans: list[tuple[int, int, str]]
    predicate: tuple[int, int] | None = None
    meta: dict = field(default_factory=dict)


def shown_types(types: Sequence[str]) -> list[str]:
    """The type names a reader emits for a tag set (KLUE's or MODU's PS/LC/OG → PER/LOC/ORG)."""
    return [SHOWN_AS.get(t, t) for t in types]


def bio_labels(types: Sequence[str]) -> list[str]:
    """The label list of a tag set: O first, then B-/I- per type (ids = positions)."""
    return [OUTSIDE, *(f"{p}-{t}" for t in types for p in ("B", "I"))]


def read_klue_ner(path: str | Path, types: dict[str, str] | None = None) -> list[TaggedSentence]:
    """KLUE-NER TSV → sentences with spans (types renamed by `types`)."""
    path, types = Path(path), dict(types or KLUE_TYPES)
    if not path.exists():
        raise UserError(f"KLUE NER file {path} does not exist: set LANGREPR_DATA_DIR to a folder holding "
                        "klue/klue-ner-v1.1_dev.tsv (or set the dataset's path)")
    sentences: list[TaggedSentence] = []
    guid, chars, tags = None, [], []

    def flush() -> None:
        if chars:
            sentences.append(TaggedSentence(guid or f"{path.name}:{len(sentences)}", "".join(chars),
                                            bio_to_spans(tags)))

    try:
        with open(path, encoding="utf-8") as fh:
            for number, raw in enumerate(fh, 1):
                line = raw.rstrip("\n").rstrip("\r")
                if line.startswith("##"):
                    if "\t" in line:                    # "## guid<TAB>marked-up sentence" starts a sentence
                        flush()
                        guid, chars, tags = line[2:].split("\t", 1)[0].strip(), [], []
                    continue
                if not line.strip("\t"):
                    flush()
                    guid, chars, tags = None, [], []
                    continue
                parts = line.split("\t")
                if len(parts) != 2 or len(parts[0]) != 1:
                    raise UserError(f"{path} line {number}: expected one character, a tab and its tag, got {line!r}")
                char, tag = parts
                if tag != OUTSIDE:
                    prefix, _, kind = tag.partition("-")
                    if prefix not in ("B", "I") or kind not in types:
                        raise UserError(f"{path} line {number}: tag {tag!r} is not in the tag set (O, B-/I- of "
                                        f"{', '.join(types)}); fix the line or extend the dataset's types")
                    tag = f"{prefix}-{types[kind]}"
                chars.append(char)
                tags.append(tag)
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "restore the original KLUE-NER release") from None
    flush()
    if not sentences:
        raise UserError(f"{path} holds no tagged sentence: point the dataset at a KLUE-NER TSV file")
    if not any(sentence.spans for sentence in sentences):   # every tag O: an F1 over no gold entity says nothing
        raise UserError(f"{path}: none of its {len(sentences)} sentences has an entity (every tag is O): the tag "
                        "column is missing or the file is cut; restore the original KLUE-NER release")
    return sentences


def bio_to_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """Character BIO tags → (start, end, type) spans; an I- that does not continue its type starts a span."""
    spans, start, kind = [], None, None
    for i, tag in enumerate([*tags, OUTSIDE]):
        prefix, _, t = tag.partition("-")
        if start is not None and (tag == OUTSIDE or prefix == "B" or t != kind):
            spans.append((start, i, kind))
            start, kind = None, None
        if tag != OUTSIDE and start is None:
            start, kind = i, t
    return spans


def read_modu_json(path: str | Path, what: str) -> dict:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{what} file {path} does not exist: request the corpus at corpus.korean.go.kr and "
                        "point the dataset's path at its JSON file")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "restore the NIKL release") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path} line {err.lineno}: malformed JSON ({err.msg}); the NIKL release is one JSON "
                        "object per file") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("document"), list):
        raise UserError(f"{path}: no top-level 'document' list; is this a NIKL MODU {what} file?")
    return payload


def read_modu_ner(path: str | Path, types: Sequence[str] = MODU_TYPES) -> list[TaggedSentence]:
    """NIKL MODU NER JSON → sentences with top-level-type spans."""
    wanted, out = set(types), []
    for doc in read_modu_json(path, "MODU NER")["document"]:
        for sentence in doc.get("sentence", []):
            spans = []
            for ne in sentence.get("NE", []):
                kind = str(ne.get("label", ""))[:2]
                if kind not in wanted:
                    raise UserError(f"{path}: sentence {sentence.get('id')} has NE label {ne.get('label')!r}, "
                                    f"whose type {kind!r} is not in the tag set ({', '.join(types)})")
                spans.append((int(ne["begin"]), int(ne["end"]), SHOWN_AS.get(kind, kind)))
            out.append(TaggedSentence(str(sentence.get("id")), sentence.get("form", ""), spans))
    if not out:
        raise UserError(f"{path} holds no sentence: point the dataset at a MODU NER JSON file")
    return out


def morpheme_tags(morphemes: Sequence[tuple], spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """One BIO tag per morpheme `(form, tag, start, end)`; the first span covering a morpheme wins."""
    tags = [OUTSIDE] * len(morphemes)
    for start, end, kind in spans:
        inside = [i for i, m in enumerate(morphemes) if m[3] > start and m[2] < end and tags[i] == OUTSIDE]
        for n, i in enumerate(inside):
            tags[i] = f"{'B' if n == 0 else 'I'}-{kind}"
    return tags
