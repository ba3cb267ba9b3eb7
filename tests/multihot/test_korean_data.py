"""Korean data for the multi-hot LM: kiwipiepy analysis + cache, token lists, encoding, batching, KorQuAD reader."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from langrepr.data.korean.batching import collate_groups, mask_positions, pack_sentences
from langrepr.data.korean.corpus import build_corpus, nsmc_neutral_reviews
from langrepr.data.korean.encoding import POS_INDEX, MorphemeEncoder
from langrepr.data.korean.korquad import in_test_part, load_korquad, read_squad_json
from langrepr.data.korean.morphemes import analyse, analyser_name, cached_analysis
from langrepr.data.korean.token_lists import (
    CLS,
    MASK,
    PAD,
    SEP,
    SPECIALS,
    UNK,
    TokenList,
    bpe_base,
    bpe_syllable,
    syllable_tokens,
)
from langrepr.errors import UserError

SENTENCES = ["아르키메데스는 스테이케이션이 유행이라고 말했다.", "영화가 정말 재미있었다.", "영화 음악이 좋았다 2014년 Best"]


@pytest.fixture(scope="module")
def analysed():
    return analyse(SENTENCES, workers=1)


def test_kiwi_gives_morphemes_with_base_tags(analysed):
    assert ("아르키메데스", "NNP") in analysed[0] and ("영화", "NNG") in analysed[1]
    assert all("-" not in tag for s in analysed for _, tag in s)     # VV-R etc. folded to VV


def test_worker_processes_give_the_same_analysis(analysed):
    assert analyse(SENTENCES * 2, workers=2, chunk_size=2) == analysed * 2


def test_the_caller_never_holds_the_analyser(analysed):
    """Kiwi (0.8 GB once it has analysed text, and not freed when deleted) lives only in the analysis children."""
    from langrepr.data.korean import morphemes

    assert morphemes._WORKER_KIWI is None
    assert ("영화", "NNG") in morphemes.dictionary_entries(("NNG",))
    assert morphemes._WORKER_KIWI is None


def test_an_analyser_that_cannot_start_fails_the_call(monkeypatch):
    """A pool initializer that raises would restart its worker for ever; the caller gets the error instead."""
    from langrepr.data.korean import morphemes

    def broken():
        raise ModuleNotFoundError("No module named 'kiwipiepy_model'", name="kiwipiepy_model")

    monkeypatch.setattr(morphemes, "new_kiwi", broken)
    with pytest.raises(ModuleNotFoundError) as err:
        analyse(SENTENCES, workers=1)
    assert err.value.name == "kiwipiepy_model"


def test_analysis_is_cached_per_corpus(tmp_path, monkeypatch, analysed):
    first = cached_analysis("fixture", SENTENCES, tmp_path, workers=1)
    assert first == analysed and len(list((tmp_path / "korean_morphemes").glob("*.jsonl.gz"))) == 1

    def no_analysis(*_, **__):
        raise AssertionError("re-analysed a cached corpus")

    monkeypatch.setattr("langrepr.data.korean.morphemes.analyse", no_analysis)
    assert cached_analysis("fixture", SENTENCES, tmp_path, workers=1) == analysed
    with pytest.raises(UserError, match="empty"):
        cached_analysis("empty", [], tmp_path)


def test_bpe_syllable_list_filters_as_the_paper_says(analysed):
    base = bpe_base(analysed * 3, bpe_size=200, pos_joined=20)
    assert base.tokens[:len(SPECIALS)] == list(SPECIALS) and any("/" in t for t in base.tokens)
    syl = syllable_tokens(analysed, 30)
    listed = bpe_syllable(base, syl)
    body = [t for t in listed.tokens[len(SPECIALS):] if not t.startswith("@")]
    assert not any("/" in t or t.startswith("##") or any(c.isascii() and c.isalnum() for c in t) for t in body)
    assert len(set(listed.tokens)) == len(listed.tokens) and listed.syllable_count == 30


def test_multi_hot_encoding_makes_one_position_per_morpheme(analysed):
    tokens = [*SPECIALS, "영화", "@아", "@르", "@키", "@메", "@데", "@스"]
    encoder = MorphemeEncoder(TokenList("bpe_syllable", tokens, analyser_name()), max_group=8)
    enc = encoder.encode([("아르키메데스", "NNP"), ("영화", "NNG"), ("뷁", "NNG")])
    assert enc.groups == [[6, 7, 8, 9, 10, 11], [5], [UNK]] and enc.divided == [True, False, False]
    assert enc.pos == [POS_INDEX["NNP"], POS_INDEX["NNG"], POS_INDEX["NNG"]]
    short = MorphemeEncoder(encoder.tokens, max_group=4, long_groups="error")
    with pytest.raises(UserError, match="max_group"):
        short.encode([("아르키메데스", "NNP")])
    assert len(MorphemeEncoder(encoder.tokens, max_group=4).encode([("아르키메데스", "NNP")]).groups) == 2


def test_bpe_base_encoding_splits_into_positions():
    tokens = [*SPECIALS, "아르", "##키", "##메데스", "이/VCP"]
    encoder = MorphemeEncoder(TokenList("bpe_base", tokens, analyser_name()))
    enc = encoder.encode([("아르키메데스", "NNP"), ("이", "VCP")])
    assert enc.groups == [[5], [6], [7], [8]] and enc.morpheme_of == [0, 0, 0, 1] and enc.divided == [True, False]


def test_token_list_from_another_analyser_is_refused(tmp_path):
    TokenList("bpe_syllable", list(SPECIALS), "UTagger 1.0").save(tmp_path / "list.json")
    with pytest.raises(UserError, match="built with 'UTagger 1.0'"):
        TokenList.load(tmp_path / "list.json")


def test_batch_shapes_and_masking_replace_a_group_as_one_position():
    seqs = pack_sentences([MorphemeEncoder(TokenList("bpe_syllable", [*SPECIALS, "@가", "@나", "다"],
                                                     analyser_name())).encode([("가나", "NNG"), ("다", "NNG")])] * 3,
                          max_len=6)
    assert [len(s.groups) for s in seqs] == [4, 2]
    batch = collate_groups(seqs, max_group=4)
    assert batch["ids"].shape == (2, 6, 2) and batch["ids"][0, 0, 0] == CLS and batch["ids"][1, 3, 0] == SEP
    assert batch["group_mask"][0, 1].tolist() == [True, True] and batch["attention_mask"][1].tolist() == [1] * 4 + [0] * 2
    masked = mask_positions(batch, vocab_size=8, generator=torch.Generator().manual_seed(0), mask_prob=1.0,
                            mask_share=1.0, random_share=0.0)
    assert masked["masked"].sum() == 6 and (masked["ids"][masked["masked"]][:, 0] == MASK).all()
    assert masked["group_mask"][masked["masked"]].sum(1).eq(1).all()         # a masked group is one slot
    assert masked["target_ids"][0].tolist() == [5, 6] and masked["target_mask"].sum() == 9
    assert (masked["ids"][..., 0][~masked["masked"] & batch["attention_mask"].bool()] != PAD).all()


def test_masking_rate_is_bert_like():
    seqs = pack_sentences([MorphemeEncoder(TokenList("bpe_syllable", [*SPECIALS, "다"], analyser_name()))
                           .encode([("다", "NNG")] * 60)] * 40, max_len=64)
    masked = mask_positions(collate_groups(seqs, 2), 9, torch.Generator().manual_seed(1))
    rate = masked["masked"].float().sum() / (masked["attention_mask"].sum() - 2 * len(seqs))
    assert 0.12 < rate < 0.18
    chosen = masked["ids"][..., 0][masked["masked"]]
    assert 0.7 < (chosen == MASK).float().mean() < 0.9


def write_squad(path, titles):
    data = [{"title": t, "paragraphs": [{"context": f"{t}는 1989년에 태어났다.", "qas": [
        {"id": f"{t}-0", "question": f"{t}가 태어난 해는?", "answers": [{"text": "1989년", "answer_start": len(t) + 2}]}]}]}
        for t in titles]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": "KorQuAD_v1.0_dev", "data": data}, ensure_ascii=False))


def test_korquad_reader_splits_by_article_and_rejects_bad_files(tmp_path):
    titles = [f"문서{i}" for i in range(20)]
    write_squad(tmp_path / "korquad1" / "KorQuAD_v1.0_dev.json", titles)
    train, test = load_korquad(str(tmp_path), "train"), load_korquad(str(tmp_path), "test")
    assert len(train) + len(test) == 20 and not {q.title for q in train} & {q.title for q in test}
    assert all(in_test_part(q.title, 0.3) for q in test) and train[0].answers == ("1989년",)
    assert train[0].context[train[0].answer_start:].startswith("1989년")
    (tmp_path / "bad.json").write_text(json.dumps({"data": [{"title": "x"}]}))
    with pytest.raises(UserError, match="not KorQuAD"):
        read_squad_json(tmp_path / "bad.json")
    with pytest.raises(UserError, match="does not exist"):
        read_squad_json(tmp_path / "missing.json")


def test_corpus_sources_reject_missing_and_empty_input(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        build_corpus("text", path=str(tmp_path / "nope.txt"))
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(UserError, match="empty"):
        build_corpus("text", path=str(tmp_path / "empty.txt"))
    with pytest.raises(UserError, match="unknown corpus source"):
        build_corpus("web")
    nsmc = tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    nsmc.parent.mkdir()
    with gzip.open(nsmc, "wt") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n1\t1\t10\t14.08.01\t최고\n2\t1\t6\t14.08.01\t그냥 그래요\n")
    assert nsmc_neutral_reviews(tmp_path, 10) == ["그냥 그래요"]            # ratings 1-4 / 9-10 never used


def test_nsp_pairs_have_types_and_half_random_seconds():
    from langrepr.data.korean.batching import collate_pairs, pack_pairs

    encoder = MorphemeEncoder(TokenList("bpe_syllable", [*SPECIALS, "다", "가"], analyser_name()))
    sentences = [encoder.encode([("다", "NNG")] * 3), encoder.encode([("가", "NNG")] * 2)] * 100
    pairs = pack_pairs(sentences, max_len=13, generator=torch.Generator().manual_seed(0))
    assert 0.35 < sum(p.is_random for p in pairs) / len(pairs) < 0.65
    assert all(len(p.first.groups) + len(p.second.groups) + 3 <= 13 for p in pairs)
    batch = collate_pairs(pairs[:2], max_group=2)
    first = len(pairs[0].first.groups)
    assert batch["ids"][0, first + 1, 0] == SEP and batch["token_type_ids"][0, first + 2] == 1
    assert batch["token_type_ids"][0, :first + 2].sum() == 0 and batch["nsp_labels"].tolist() == [
        pairs[0].is_random, pairs[1].is_random]
