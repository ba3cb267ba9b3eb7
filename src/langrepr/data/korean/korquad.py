"""KorQuAD v1.0 (SQuAD v1.1 JSON) reader: the HF hub `KorQuAD/squad_kor_v1` by default, or a local copy.

The local dev file is read as is (it is CC BY-ND: never modified, never copied into the repo). The quick profile
splits it *by article* into a train part and a test part, so no test paragraph is seen in training or in the
pretraining corpus.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from langrepr.data.hub import describe, load_hub
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

LOCAL_DEV = "korquad1/KorQuAD_v1.0_dev.json"
HUB_ID = "KorQuAD/squad_kor_v1"


@dataclass(frozen=True)
class Question:
    """One KorQuAD question with its paragraph and gold answers."""

    id: str
    title: str
    context: str
    question: str
    answers: tuple[str, ...]      # every gold answer text (dev has several annotators' answers)
    answer_start: int             # character offset of the first answer in `context`


def read_squad_json(path: str | Path) -> list[Question]:
    """Questions of a SQuAD-v1.1-format file, with a one-line error when the file is not one."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"KorQuAD file {path} does not exist: set LANGREPR_DATA_DIR to a folder holding {LOCAL_DEV}")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        articles = payload["data"]
        out = [Question(qa["id"], article["title"], paragraph["context"], qa["question"],
                        tuple(a["text"] for a in qa["answers"]), int(qa["answers"][0]["answer_start"]))
               for article in articles for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, f"pass the original {LOCAL_DEV}") from None
    except (json.JSONDecodeError, KeyError, TypeError, IndexError) as err:
        raise UserError(f"{path} is not KorQuAD v1.0 (SQuAD v1.1) JSON ({type(err).__name__}: {err}): "
                        "pass the original KorQuAD_v1.0_*.json file") from None
    if not out:
        raise UserError(f"{path} holds no questions: pass the original KorQuAD_v1.0_*.json file")
    for q in out:   # a span outside its context would train on the wrong characters
        if q.context[q.answer_start:q.answer_start + len(q.answers[0])] != q.answers[0]:
            raise UserError(f"{path}: question {q.id}'s answer {q.answers[0]!r} is not in its context at answer_start "
                            f"{q.answer_start}: pass the original KorQuAD_v1.0_*.json file")
    return out


def read_hub(split: str, hub_id: str = HUB_ID, revision: str | None = None) -> list[Question]:
    """The hub copy (60,407 train / 5,774 validation), the full profile's default source.

    The id without its `KorQuAD/` owner no longer resolves; the repository `KorQuAD/squad_kor_v1` holds parquet
    on its main branch (tests/fixtures/hub_ids.json).
    """
    try:
        rows = load_hub(hub_id, revision=revision, split=split)
    except Exception as err:  # offline, renamed dataset, ...: one actionable line
        raise UserError(f"could not load {describe(hub_id, None, revision)} from the Hugging Face Hub "
                        f"({type(err).__name__}): go online once, "
                        f"or give a local copy (data_dir holding {LOCAL_DEV})") from None
    columns = [rows[c] for c in ("id", "title", "context", "question", "answers")]   # each column read once
    return [Question(i, t, c, q, tuple(a["text"]), int(a["answer_start"][0])) for i, t, c, q, a in zip(*columns)]


def in_test_part(title: str, test_fraction: float) -> bool:
    """Deterministic article-level split of the dev file: a title hash decides, independent of order."""
    bucket = int(hashlib.sha256(title.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < test_fraction


def load_korquad(data_dir: str | None, part: str, test_fraction: float = 0.3) -> list[Question]:
    """Questions of `part` (train | test).

    With `data_dir`: the local dev file split by article (a stand-in, said so in every table); without it, the
    hub's train / validation splits.
    """
    if part not in ("train", "test"):
        raise UserError(f"unknown KorQuAD part '{part}': use train or test")
    if data_dir is None:
        return read_hub("train" if part == "train" else "validation")
    questions = read_squad_json(Path(data_dir) / LOCAL_DEV)
    return [q for q in questions if in_test_part(q.title, test_fraction) == (part == "test")]


def train_part_contexts(data_dir: str | None, test_fraction: float = 0.3) -> list[str]:
    """Distinct paragraphs of the train part: the only KorQuAD text the pretraining corpus may use."""
    seen: dict[str, None] = {}
    for q in load_korquad(data_dir, "train", test_fraction):
        seen.setdefault(q.context, None)
    return list(seen)
