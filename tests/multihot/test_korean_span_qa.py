"""KorQuAD v1.0 scoring (official normalisation, character-level F1) and Table 4's divided-answer test, by hand."""

from __future__ import annotations

import pytest
import torch

from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.korquad import Question
from langrepr.data.korean.korquad_features import answer_divided
from langrepr.data.korean.morphemes import analyser_name
from langrepr.data.korean.token_lists import SPECIALS, TokenList
from langrepr.downstream_scores import exact_match, f1, first_sentence, normalize_answer, score
from langrepr.tasks.span_qa import best_span


def test_normalisation_removes_korquad_symbols_and_punctuation():
    assert normalize_answer("《임종석》의 (1989년)!") == "임종석 의 1989년"
    assert normalize_answer("  ‘A’ , B.  ") == "a b"


def test_character_level_f1_by_hand():
    # prediction chars 1,9,8,9,년,2,월 (7); gold 1,9,8,9,년 (5); common 5 → P = 5/7, R = 1, F1 = 10/12
    assert f1("1989년 2월", "1989년") == pytest.approx(2 * (5 / 7) * 1 / (5 / 7 + 1))
    assert f1("서울", "부산") == 0.0
    assert exact_match("1989년.", "1989년") == 1.0 and exact_match("1989", "1989년") == 0.0


def test_score_takes_the_best_gold_answer_and_counts_missing_as_wrong():
    qs = [Question("a", "t", "c", "q", ("교황", "교황 베네딕토"), 0), Question("b", "t", "c", "q", ("서울",), 0)]
    result = score({"a": "교황 베네딕토"}, qs)
    assert result == {"em": 50.0, "f1": 50.0}


def test_first_sentence_baseline():
    q = Question("a", "t", "임종석은 1989년에 수배되었다. 그는 체포되었다.", "q", ("1989년",), 6)
    assert first_sentence(q.context) == "임종석은 1989년에 수배되었다."


def test_answer_divided_under_each_kind_of_list():
    multi = MorphemeEncoder(TokenList("bpe_syllable", [*SPECIALS, "교황", "@베", "@네"], analyser_name()))
    assert not answer_divided(multi, [("교황", "NNG")])
    assert answer_divided(multi, [("교황", "NNG"), ("베네", "NNP")])        # a multi-hot group
    base = MorphemeEncoder(TokenList("bpe_base", [*SPECIALS, "교", "##황", "교황/NNG"], analyser_name()))
    assert not answer_divided(base, [("교황", "NNG")]) and answer_divided(base, [("교황", "NNP")])  # 2 BPE pieces


def test_windows_put_the_answer_on_its_morpheme_positions():
    from langrepr.data.korean.korquad_features import collate_windows, question_windows

    tokens = [*SPECIALS, "임종석", "@1", "@9", "@8", "년", "에", "은", "?", "해"]
    encoder = MorphemeEncoder(TokenList("bpe_syllable", tokens, analyser_name()))
    context = "임종석은 1989년에"
    ctx = [("임종석", "NNP", 0, 3), ("은", "JX", 3, 4), ("1989", "SN", 5, 9), ("년", "NNB", 9, 10), ("에", "JKB", 10, 11)]
    q = Question("q", "t", context, "해?", ("1989년",), 5)
    [window] = question_windows(q, [("해", "NNG", 0, 1), ("?", "SF", 1, 2)], ctx, encoder, max_len=16, stride=8)
    # [CLS] 해 ? [SEP] 임종석 은 (1989 as one group) 년 에 [SEP]: the answer covers positions 6..7
    assert (window.start, window.end) == (6, 7) and window.types == [0] * 4 + [1] * 6
    start, end = torch.full((10,), -5.0), torch.full((10,), -5.0)
    start[6], end[7] = 3.0, 3.0
    batch = collate_windows([window], max_group=16)
    assert batch["context_mask"][0].tolist() == [False] * 4 + [True] * 5 + [False]
    _, span = best_span(start, end, batch["context_mask"][0], batch["char_spans"][0], max_answer=5)
    assert context[span[0]:span[1]] == "1989년"
    assert best_span(start, end, torch.zeros(10, dtype=torch.bool), window.char_spans, 5) == (float("-inf"), None)
    # 2 context positions per window, stride 1: 4 windows, only the one starting at the answer holds it whole
    short = question_windows(q, [("해", "NNG", 0, 1)], ctx, encoder, max_len=6, stride=1)
    assert [(w.start, w.end) for w in short] == [(0, 0), (0, 0), (3, 4), (0, 0)]
