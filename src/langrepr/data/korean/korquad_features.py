"""KorQuAD questions → multi-hot input windows with answer spans at morpheme units (multi-hot LM §3.1).

Layout: [CLS] question [SEP] context window [SEP], token types 0 / 1; a long paragraph gives several windows
(`stride` positions apart). The answer is re-processed to morpheme units: its character span selects the context
morphemes it overlaps, and the target is the first / last input position of those morphemes ([CLS] when the
window does not hold the whole answer). A predicted span maps back to raw text through the morphemes' character
offsets, so it is scored against the raw answer text (`collate_windows` carries each position's character span).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from langrepr.data.korean.encoding import POS_INDEX, MorphemeEncoder
from langrepr.data.korean.korquad import Question
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.token_lists import CLS, PAD, SEP

SPECIAL_POS = POS_INDEX["[SPECIAL]"]


@dataclass
class Window:
    """One input window of one question."""

    qid: str
    groups: list[list[int]]
    pos: list[int]
    types: list[int]
    char_spans: list[tuple[int, int] | None]   # context character span of each position (None: not context)
    start: int
    end: int


def answer_positions(morphemes: Sequence[tuple], morpheme_of: Sequence[int], start: int, end: int
                     ) -> tuple[int, int] | None:
    """First / last context position whose morpheme overlaps the character span [start, end)."""
    hit = [p for p, m in enumerate(morpheme_of) if morphemes[m][3] > start and morphemes[m][2] < end]
    return (hit[0], hit[-1]) if hit else None


def question_windows(question: Question, question_morphemes: Sequence[tuple], context_morphemes: Sequence[tuple],
                     encoder: MorphemeEncoder, max_len: int, stride: int, max_question: int = 24) -> list[Window]:
    q = encoder.encode([m[:2] for m in question_morphemes])
    c = encoder.encode([m[:2] for m in context_morphemes])
    q_groups, q_pos = q.groups[:max_question], q.pos[:max_question]
    budget = max_len - len(q_groups) - 3
    answer_text = question.answers[0]
    span = answer_positions(context_morphemes, c.morpheme_of, question.answer_start,
                            question.answer_start + len(answer_text))
    windows, first = [], 0
    while True:
        last = min(first + budget, len(c.groups))
        head = 1 + len(q_groups) + 1
        start = end = 0
        if span and first <= span[0] and span[1] < last:
            start, end = head + span[0] - first, head + span[1] - first
        spans = [(context_morphemes[m][2], context_morphemes[m][3]) for m in c.morpheme_of[first:last]]
        windows.append(Window(
            question.id, [[CLS], *q_groups, [SEP], *c.groups[first:last], [SEP]],
            [SPECIAL_POS, *q_pos, SPECIAL_POS, *c.pos[first:last], SPECIAL_POS],
            [0] * head + [1] * (last - first + 1), [None] * head + spans + [None], start, end))
        if last >= len(c.groups):
            return windows
        first += stride


def collate_windows(windows: Sequence[Window], max_group: int) -> dict:
    """Windows as a batch: the input tensors and the `start`/`end` targets.

    For decoding a span back to text it also carries `context_mask (B, L)` (positions inside the paragraph) and
    each window's `qid` and `char_spans`.
    """
    length = max(len(w.groups) for w in windows)
    width = min(max_group, max(len(g) for w in windows for g in w.groups))
    B = len(windows)
    ids = torch.full((B, length, width), PAD, dtype=torch.long)
    pos = torch.full((B, length), SPECIAL_POS, dtype=torch.long)
    types = torch.zeros(B, length, dtype=torch.long)
    attention = torch.zeros(B, length, dtype=torch.long)
    for b, w in enumerate(windows):
        for p, group in enumerate(w.groups):
            ids[b, p, :min(len(group), width)] = torch.tensor(group[:width])
        n = len(w.groups)
        pos[b, :n], types[b, :n], attention[b, :n] = torch.tensor(w.pos), torch.tensor(w.types), 1
    return {"ids": ids, "group_mask": ids != PAD, "pos": pos, "token_type_ids": types, "attention_mask": attention,
            "start": torch.tensor([w.start for w in windows]), "end": torch.tensor([w.end for w in windows]),
            "context_mask": torch.tensor([[s is not None for s in w.char_spans] + [False] * (length - len(w.groups))
                                          for w in windows]),
            "qid": [w.qid for w in windows], "char_spans": [w.char_spans for w in windows]}



def answer_divided(encoder: MorphemeEncoder, morphemes: Sequence[tuple[str, str]]) -> bool:
    """Table 4's split: does the token list divide at least one morpheme of the answer?"""
    return any(encoder.encode([m[:2] for m in morphemes]).divided)


def korquad_windows(questions: Sequence[Question], encoder: MorphemeEncoder, name: str, cache_dir: str,
                    workers: int, max_len: int, stride: int) -> list[Window]:
    """Every question's input windows (contexts and questions analysed once, cached under `name`)."""
    contexts = list(dict.fromkeys(q.context for q in questions))
    analysed = dict(zip(contexts, cached_analysis(f"{name}_contexts", contexts, cache_dir, workers, offsets=True)))
    asked = cached_analysis(f"{name}_questions", [q.question for q in questions], cache_dir, workers)
    return [w for q, qm in zip(questions, asked)
            for w in question_windows(q, qm, analysed[q.context], encoder, max_len, stride)]
