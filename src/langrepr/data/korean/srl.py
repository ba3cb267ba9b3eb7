"""NIKL MODU semantic role labelling corpus → one tagged example per predicate (multi-hot LM §3.2).

The release is JSON: document → sentence → `form` and `SRL` items, each with a `predicate` (`form`, `begin`,
`end`, `lemma`, `sense_id`) and its `argument`s (`form`, `label`, `begin`, `end`). Each predicate becomes one
`TaggedSentence` whose spans are its arguments; the model input appends the predicate's word segment after the
sentence, as the paper does (`langrepr.tasks.token_classification`).

[inferred, configurable]: the paper counts 18 tags without listing them; `SRL_TYPES` is the release's ARG0-ARG3
and ARGA plus its 13 ARGM- adjunct labels (ARG4, rare, left out); the dataset config's `types` replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from langrepr.data.korean.ner import TaggedSentence, read_modu_json
from langrepr.errors import UserError

SRL_TYPES = ("ARG0", "ARG1", "ARG2", "ARG3", "ARGA", "ARGM-ADV", "ARGM-CAU", "ARGM-CND", "ARGM-DIR", "ARGM-DIS",
             "ARGM-EXT", "ARGM-INS", "ARGM-LOC", "ARGM-MNR", "ARGM-NEG", "ARGM-PRD", "ARGM-PRP", "ARGM-TMP")


def read_modu_srl(path: str | Path, types: Sequence[str] = SRL_TYPES) -> list[TaggedSentence]:
    """One example per (sentence, predicate) with its arguments as labelled character spans."""
    wanted, out = set(types), []
    for doc in read_modu_json(path, "MODU SRL")["document"]:
        for sentence in doc.get("sentence", []):
            text, sid = sentence.get("form", ""), sentence.get("id")
            for n, frame in enumerate(sentence.get("SRL", [])):
                predicate = frame.get("predicate") or {}
                if "begin" not in predicate or "end" not in predicate:
                    raise UserError(f"{path}: sentence {sid} frame {n} has no predicate begin/end; is this a MODU "
                                    "SRL file?")
                spans = []
                for arg in frame.get("argument", []):
                    if arg.get("label") not in wanted:
                        raise UserError(f"{path}: sentence {sid} has argument label {arg.get('label')!r}, not in "
                                        f"the tag set ({', '.join(types)}); extend the dataset's types")
                    spans.append((int(arg["begin"]), int(arg["end"]), arg["label"]))
                out.append(TaggedSentence(f"{sid}#{n}", text, spans, (int(predicate["begin"]), int(predicate["end"])),
                                          {"lemma": predicate.get("lemma"), "sense_id": predicate.get("sense_id")}))
    if not out:
        raise UserError(f"{path} holds no predicate frame: point the dataset at a MODU SRL JSON file")
    return out


def predicate_segment(text: str, predicate: tuple[int, int]) -> str:
    """The whole word segment (eojeol) holding the predicate: the paper appends it after the sentence."""
    start, end = predicate
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end]
