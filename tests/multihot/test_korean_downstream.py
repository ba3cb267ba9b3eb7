"""Multi-hot LM downstream data and scoring: KLUE/MODU NER and MODU SRL readers on generated fixtures, the
NSMC-style split rule, character-span → morpheme BIO alignment, seqeval scores and the reference taggers."""

from __future__ import annotations

import gzip
import json

import pytest

from langrepr.data.korean.downstream import IGNORE, collate_tagging, load_tagged, tagging_input
from langrepr.data.korean.ner import bio_to_spans, morpheme_tags, read_klue_ner, read_modu_ner
from langrepr.data.korean.nsmc import label_of, nsmc_style_split, read_crawl
from langrepr.data.korean.srl import predicate_segment, read_modu_srl
from langrepr.data.korean.token_lists import SPECIALS, TokenList
from langrepr.downstream_scores import MajorityTagger, accuracy, all_outside, majority_class, tagging_scores
from langrepr.errors import UserError

KLUE = """## 토큰, 레이블 구분자 : \\t
## 컬럼명 : CHAR\tNE_TAG
## s0\t<박:PS>씨는 <서울:LC>에 산다
박\tB-PS
씨\tO
는\tO
 \tO
서\tB-LC
울\tI-LC
에\tO
 \tO
산\tO
다\tO

## s1\t<한국은행:OG>
한\tB-OG
국\tI-OG
은\tI-OG
행\tI-OG
"""


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_klue_reader_spans_and_renamed_types(tmp_path):
    sentences = read_klue_ner(write(tmp_path / "ner.tsv", KLUE))
    assert [s.id for s in sentences] == ["s0", "s1"]
    assert sentences[0].text == "박씨는 서울에 산다"
    assert sentences[0].spans == [(0, 1, "PER"), (4, 6, "LOC")]
    assert sentences[1].spans == [(0, 4, "ORG")]


@pytest.mark.parametrize("bad,line,words", [("박B-PS", 4, "expected one character"),
                                            ("박\tB-XX", 4, "not in the tag set"),
                                            ("박\tZ-PS", 4, "not in the tag set")])
def test_klue_bad_line_names_its_number(tmp_path, bad, line, words):
    text = KLUE.replace("박\tB-PS", bad, 1)
    with pytest.raises(UserError, match=rf"line {line}: .*{words}"):
        read_klue_ner(write(tmp_path / "ner.tsv", text))


def test_missing_klue_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match="does not exist: set LANGREPR_DATA_DIR"):
        read_klue_ner(tmp_path / "absent.tsv")


def test_bio_to_spans_repairs_dangling_inside():
    assert bio_to_spans(["O", "I-PER", "I-PER", "B-PER", "I-LOC"]) == [(1, 3, "PER"), (3, 4, "PER"), (4, 5, "LOC")]


def test_morpheme_tags_from_character_spans():
    # 박/NNP 씨/NNB 는/JX 서울/NNP 에/JKB : (form, tag, start, end)
    morphemes = [("박", "NNP", 0, 1), ("씨", "NNB", 1, 2), ("는", "JX", 2, 3), ("서울", "NNP", 4, 6), ("에", "JKB", 6, 7)]
    assert morpheme_tags(morphemes, [(0, 1, "PER"), (4, 6, "LOC")]) == ["B-PER", "O", "O", "B-LOC", "O"]
    # a span over two morphemes: B then I; a morpheme partly inside a span counts as inside
    assert morpheme_tags(morphemes, [(0, 2, "PER"), (5, 7, "LOC")]) == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]


MODU_NER = {"id": "NXNE", "document": [{"id": "d1", "sentence": [
    {"id": "d1.1", "form": "이순신은 한산도에서 싸웠다.", "NE": [
        {"id": 1, "form": "이순신", "label": "PS_NAME", "begin": 0, "end": 3},
        {"id": 2, "form": "한산도", "label": "LCG_ISLAND", "begin": 5, "end": 8}]},
    {"id": "d1.2", "form": "삼성전자가 올랐다.", "NE": [{"id": 1, "form": "삼성전자", "label": "OGG_ECONOMY",
                                                    "begin": 0, "end": 4}]}]}]}


def test_modu_ner_reader_top_level_types(tmp_path):
    path = write(tmp_path / "ner.json", json.dumps(MODU_NER, ensure_ascii=False))
    sentences = read_modu_ner(path)
    assert [s.spans for s in sentences] == [[(0, 3, "PER"), (5, 8, "LOC")], [(0, 4, "ORG")]]


def test_modu_ner_bad_inputs(tmp_path):
    bad = json.loads(json.dumps(MODU_NER))
    bad["document"][0]["sentence"][0]["NE"][0]["label"] = "XX_THING"
    with pytest.raises(UserError, match="'XX' is not in the tag set"):
        read_modu_ner(write(tmp_path / "bad.json", json.dumps(bad)))
    with pytest.raises(UserError, match="line 3: malformed JSON"):
        read_modu_ner(write(tmp_path / "broken.json", '{"document": [\n{"id": 1,\n"sentence": ]}'))


MODU_SRL = {"id": "NXSR", "document": [{"id": "d1", "sentence": [
    {"id": "d1.1", "form": "철수가 밥을 먹었다.",
     "word": [{"id": 1, "form": "철수가", "begin": 0, "end": 3}, {"id": 2, "form": "밥을", "begin": 4, "end": 6},
              {"id": 3, "form": "먹었다.", "begin": 7, "end": 11}],
     "SRL": [{"predicate": {"form": "먹", "begin": 7, "end": 8, "lemma": "먹다", "sense_id": 1},
              "argument": [{"form": "철수가", "label": "ARG0", "begin": 0, "end": 3},
                           {"form": "밥을", "label": "ARG1", "begin": 4, "end": 6}]}]}]}]}


def test_modu_srl_reader_one_example_per_predicate(tmp_path):
    examples = read_modu_srl(write(tmp_path / "srl.json", json.dumps(MODU_SRL, ensure_ascii=False)))
    assert len(examples) == 1 and examples[0].id == "d1.1#0"
    assert examples[0].spans == [(0, 3, "ARG0"), (4, 6, "ARG1")] and examples[0].predicate == (7, 8)
    assert predicate_segment(examples[0].text, examples[0].predicate) == "먹었다."
    bad = json.loads(json.dumps(MODU_SRL))
    bad["document"][0]["sentence"][0]["SRL"][0]["argument"][0]["label"] = "ARGX"
    with pytest.raises(UserError, match="'ARGX', not in the tag set"):
        read_modu_srl(write(tmp_path / "bad.json", json.dumps(bad)))


def crawl(tmp_path, rows, header="review_id\tmovie_id\trating\tdate\treview"):
    path = tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    path.parent.mkdir(exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(header + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows))
    return path


def test_nsmc_rule_balanced_deduplicated(tmp_path):
    rows = [(i, 1, r, "14.08.01", f"리뷰 {i % 9}") for i, r in enumerate([1, 4, 9, 10, 5, 8, 2, 10, 3, 9] * 3)]
    rows += [(99, 1, 1, "14.08.01", "가" * 140), (100, 1, 10, "14.08.01", " ")]   # too long; empty
    path = crawl(tmp_path, rows)
    by_label = read_crawl(path)
    assert [label_of(r) for r in (1, 4, 5, 8, 9, 10)] == [0, 0, None, None, 1, 1]
    texts = [r.text for part in by_label.values() for r in part]
    assert len(texts) == len(set(texts)) and all(len(t) < 140 and t for t in texts)
    split = nsmc_style_split(tmp_path, per_class=3, test_fraction=1 / 3, cache_dir=tmp_path / "cache")
    labels = [r.label for part in split.values() for r in part]
    assert labels.count(0) == labels.count(1) == 3 and len(split["test"]) == 2
    again = nsmc_style_split(tmp_path, per_class=3, test_fraction=1 / 3, cache_dir=tmp_path / "cache")
    assert again == split                                            # read back from the cache, same split


def test_nsmc_bad_inputs(tmp_path):
    path = crawl(tmp_path, [(1, 1, 9, "x", "좋다")], header="review_id\tmovie_id\tdate\treview")
    with pytest.raises(UserError, match="no rating column"):
        read_crawl(path)
    path = crawl(tmp_path, [(1, 1, 9, "x", "좋다"), (2, 1, "ten", "x", "별로")])
    with pytest.raises(UserError, match="line 3: rating 'ten' is not an integer"):
        read_crawl(path)
    crawl(tmp_path, [(1, 1, 9, "x", "좋다"), (2, 1, 1, "x", "별로")])
    with pytest.raises(UserError, match="only"):
        nsmc_style_split(tmp_path, per_class=5)


def test_tagging_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    predicted = [["B-PER", "I-PER", "O", "O"]]
    scores = tagging_scores(gold, predicted, ["PER", "LOC", "ORG"])
    assert scores["f1_PER"] == 100 and scores["f1_LOC"] == 0 and scores["f1_ORG"] == 0
    assert scores["macro_f1"] == pytest.approx(50.0)            # mean over the types present in gold
    assert scores["micro_f1"] == pytest.approx(200 / 3)         # P = 1/1, R = 1/2


def test_reference_taggers():
    train = [[("박", "NNP"), ("씨", "NNB")], [("박", "NNP"), ("씨", "NNB")], [("박", "NNG"), ("씨", "NNB")]]
    tags = [["B-PER", "O"], ["B-PER", "O"], ["O", "O"]]
    tagger = MajorityTagger(train, tags)
    assert tagger([[("박", "NNP"), ("김", "NNP"), ("박", "NNG")]]) == [["B-PER", "O", "O"]]
    assert all_outside([[1, 2], [3]]) == [["O", "O"], ["O"]]
    assert majority_class([1, 0, 1]) == 1 and accuracy([1, 0, 1], [1, 1, 1]) == pytest.approx(200 / 3)


def test_tagging_input_tags_first_positions_and_appends_predicate():
    from langrepr.data.korean.encoding import MorphemeEncoder

    tl = TokenList("bpe_base", [*SPECIALS, "박", "##씨", "서울/NNP", "먹", "##다"], "test")
    encoder = MorphemeEncoder(tl)
    index = {"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3, "I-LOC": 4}
    morphemes = [("박씨", "NNP", 0, 2), ("서울", "NNP", 3, 5)]
    example = tagging_input(morphemes, ["B-PER", "B-LOC"], index, encoder, 16, predicate=[("먹다", "VV", 0, 2)],
                            index=7)
    assert example.encoded.groups == [[5], [6], [7], [3], [8], [9]]     # 박 ##씨 | 서울/NNP | [SEP] 먹 ##다
    assert example.labels == [1, IGNORE, 3, IGNORE, IGNORE, IGNORE] and example.first == [0, 2]
    batch = collate_tagging([example], 16)
    assert batch["labels"][0].tolist() == [IGNORE, 1, IGNORE, 3, IGNORE, IGNORE, IGNORE, IGNORE]
    assert batch["token_type_ids"][0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert batch["index"] == [7] and batch["first"] == [[1, 3]]      # where each morpheme's tag is read ([CLS] first)
    cut = tagging_input(morphemes, ["B-PER", "B-LOC"], index, encoder, 4)   # room for 2 positions: 서울 cut off
    assert cut.first == [0, None]


def test_load_tagged_splits_by_id_and_rejects_bad_settings(tmp_path):
    sentence = KLUE.split("## s0", 1)[1].split("## s1")[0]           # "\t<marked-up>\n" + char lines + blank
    many = "".join(f"## s{i}{sentence}" for i in range(12))
    path = write(tmp_path / "ner.tsv", many)
    parts, types = load_tagged({"source": "klue", "path": str(path), "test_fraction": 0.5,
                                "types": ["PS", "LC", "OG"]})
    assert types == ["PER", "LOC", "ORG"] and parts["train"] and parts["test"]
    ids = [s.id for p in parts.values() for s in p]
    assert sorted(ids) == sorted(f"s{i}" for i in range(12))
    again, _ = load_tagged({"source": "klue", "path": str(path), "test_fraction": 0.5, "types": ["PS", "LC", "OG"]})
    assert [s.id for s in again["test"]] == [s.id for s in parts["test"]]      # the same split every time
    with pytest.raises(UserError, match="the test part is empty"):
        load_tagged({"source": "klue", "path": str(path), "test_fraction": 0.0, "types": ["PS", "LC", "OG"]})
    with pytest.raises(UserError, match="unknown tagging source"):
        load_tagged({"source": "conll", "path": str(path)})

