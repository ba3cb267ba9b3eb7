"""The Korean corpora, NSMC, KLUE NER and KorQuAD readers and multi-hot cells on bad data: another encoding,
cut or empty files, a changed corpus, a missing analyser model.
"""

from __future__ import annotations

import gzip
import importlib
import json
import sys
from pathlib import Path

import pytest

from cases import KO, KO_SIZES, out, records, user_error
from conftest import fails_with, run_main
from tiny_data import write_korean_quick

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


def test_X23_a_missing_python_module_is_one_line_naming_it(tmp_path, capfd, monkeypatch):
    """kiwipiepy without its model package, on a corpus no analysis is cached for."""
    corpus = tmp_path / "k_text" / "small.txt"
    corpus.parent.mkdir()
    corpus.write_text("대한민국의 수도는 서울이다.\n오늘은 날씨가 좋다.\n" * 10, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "kiwipiepy_model", None)         # `import kiwipiepy_model` fails
    import kiwipiepy

    monkeypatch.setattr(kiwipiepy, "Kiwi", _kiwi_without_model)
    line = fails_with(capfd, [*KO, "profile=quick", f"dataset.corpus.path={corpus}", *out(tmp_path)])
    assert line.endswith(" needs the Python module 'kiwipiepy_model', which is not installed: pip install "
                         "kiwipiepy_model (`make install` installs the project's dependencies)")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


def _kiwi_without_model(*args, **kwargs):
    import kiwipiepy_model  # noqa: F401  (what kiwipiepy imports for its default model)


# ---------------------------------------------------------------- multi-hot cells: the corpus file (X16-X18, X21)

KOREAN = ["대한민국의 수도는 서울이다.", "오늘은 날씨가 좋아서 공원에 갔다.", "영화가 정말 재미있었다.", "배우들의 연기가 좋았다."]
OTHER_KOREAN = ["감독의 다음 작품이 기대된다.", "아르키메데스 이야기는 신기했다.", "스토리가 조금 지루했다.",
                "음악이 아름다운 영화였다.", "서울로 옮긴 뒤 학교를 세웠다.", "회의는 다음 주로 미뤄졌다."]


def korean_text(path: Path, sentences: list[str], n: int, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(sentences[i % len(sentences)] + "\n" for i in range(n)).encode(encoding))
    return path


def ko(path: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [*KO, "profile=quick", f"dataset.corpus.path={path}", *out(tmp_path), *extra]


def test_X16_a_korean_corpus_in_cp949_names_file_and_encoding(tmp_path, capfd):
    path = korean_text(tmp_path / "k_text" / "cp949.txt", KOREAN, 20, "cp949")
    assert fails_with(capfd, ko(path, tmp_path)) == (
        f"{path} is not UTF-8 text (byte 0; it looks like CP949): re-encode it with `iconv -f CP949 -t UTF-8 {path} > "
        f"{path}.utf8 && mv {path}.utf8 {path}`, or point dataset.corpus.path at a UTF-8 export of the corpus")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


def test_X17_X18_a_changed_corpus_refuses_the_finished_cell_and_force_rebuilds_the_token_lists(tmp_path, capfd):
    path = korean_text(tmp_path / "k_text" / "mut.txt", KOREAN, 30)
    assert run_main(ko(path, tmp_path, "run_id=ko_mut")) == 0, capfd.readouterr().err[-3000:]
    (before,) = records(tmp_path / "out").values()
    korean_text(path, KOREAN + OTHER_KOREAN, 90)                                     # X17: new sentences
    capfd.readouterr()
    line = fails_with(capfd, ko(path, tmp_path, "run_id=ko_mut"))
    assert "changed since it finished" in line and "mut.txt" in line and "force=true" in line
    assert run_main(ko(path, tmp_path, "run_id=ko_mut", "force=true")) == 0          # X18: lists of the new corpus
    (after,) = records(tmp_path / "out").values()
    fresh = tmp_path / "fresh"
    assert run_main([*KO, "profile=quick", f"dataset.corpus.path={path}", f"paths.output_root={fresh}",
                     f"paths.cache_dir={fresh / 'cache'}", "run_id=ko_fresh"]) == 0
    (reference,) = records(fresh).values()
    lists = [k for k in after["metrics"] if k.endswith("all_tokens")]
    assert lists and {k: after["metrics"][k] for k in lists} == {k: reference["metrics"][k] for k in lists}
    assert {k: after["metrics"][k] for k in lists} != {k: before["metrics"][k] for k in lists}


def test_X21_a_rating_that_is_not_a_number_names_file_and_line(tmp_path, capfd):
    data = write_korean_quick(tmp_path / "k_badnsmc")
    crawl = data / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    lines = gzip.decompress(crawl.read_bytes()).decode().splitlines(keepends=True)
    lines[30] = lines[30].replace("\t5\t", "\tten\t").replace("\t6\t", "\tten\t").replace("\t7\t", "\tten\t") \
        .replace("\t8\t", "\tten\t")
    crawl.write_bytes(gzip.compress("".join(lines).encode()))
    assert fails_with(capfd, ["experiment=multihot_table1", "profile=quick", "dataset=korean_quick",
                              f"paths.data_dir={data}", *KO_SIZES, *out(tmp_path)]) == (
        f"{crawl} line 31: rating 'ten' is not an integer 1-10; fix or drop that row")


# ---------------------------------------------------------------- NSMC: the raw crawl (N15-N21)

CRAWL_HEADER = "review_id\tmovie_id\trating\tdate\treview\n"


def crawl(tmp_path: Path, body: str, header: str = CRAWL_HEADER) -> Path:
    path = tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress((header + body).encode()))
    return path


def reviews(n: int, rating=lambda i: 1 + 9 * (i % 2), text=lambda i: f"영화 {i}") -> str:
    return "".join(f"{i}\t{i % 7}\t{rating(i)}\t14.08.01\t{text(i)}\n" for i in range(n))


def nsmc_split(tmp_path: Path, per_class: int = 5):
    from langrepr.data.korean.nsmc import nsmc_style_split

    return nsmc_style_split(tmp_path, per_class)


def test_N15_a_crawl_with_one_class_names_the_missing_class(tmp_path):
    path = crawl(tmp_path, reviews(20, rating=lambda i: 10))
    assert user_error(nsmc_split, tmp_path) == (
        f"{path} has no eligible negative review (rating 1-4, under 140 characters): the crawl is cut or filtered; "
        "restore the original crawl")


def test_N16_a_crawl_with_only_its_header_is_one_line(tmp_path):
    crawl(tmp_path, "")
    assert user_error(nsmc_split, tmp_path) == (
        "NSMC-style split wants 5 reviews per class but the crawl has only {0: 0, 1: 0} eligible: lower per_class")


def test_N17_a_truncated_crawl_is_a_damaged_gzip_file(tmp_path):
    path = crawl(tmp_path, reviews(400))
    path.write_bytes(path.read_bytes()[:-40])
    assert user_error(nsmc_split, tmp_path) == (
        f"{path} is a damaged gzip file (EOFError): restore the original crawl")


def test_N18_repeated_reviews_are_counted_once(tmp_path):
    from langrepr.data.korean.nsmc import read_crawl

    path = crawl(tmp_path, reviews(60, text=lambda i: f"영화 {i % 6}"))
    assert {label: sorted(r.text for r in rows) for label, rows in read_crawl(path).items()} == {
        0: ["영화 0", "영화 2", "영화 4"], 1: ["영화 1", "영화 3", "영화 5"]}


def test_N19_an_empty_crawl_file_says_empty(tmp_path):
    path = crawl(tmp_path, "", header="")
    assert user_error(nsmc_split, tmp_path) == f"{path} is empty: restore the original crawl"


def test_N20_a_row_cut_short_names_its_line(tmp_path):
    path = crawl(tmp_path, reviews(20) + "77\t3\n")
    assert user_error(nsmc_split, tmp_path) == (
        f"{path} line 22: rating None is not an integer 1-10; fix or drop that row")


def test_N21_a_leam_nsmc_cell_on_a_truncated_crawl_stops_with_one_line(tmp_path, capfd):
    path = crawl(tmp_path / "data", reviews(400))
    path.write_bytes(path.read_bytes()[:-40])
    assert fails_with(capfd, ["experiment=leam_nsmc", "profile=quick", "model=leam", "++hydra.sweeper.params.seed=1",
                              "debug=leam_smoke", f"paths.data_dir={tmp_path / 'data'}", *out(tmp_path)]) == (
        f"{path} is a damaged gzip file (EOFError): restore the original crawl")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


# ---------------------------------------------------------------- Korean corpora, KLUE NER, KorQuAD (N22-N33)

def test_N22_a_korean_corpus_cut_inside_a_character_says_cut_short(tmp_path, capfd):
    path = korean_text(tmp_path / "k_text" / "cut.txt", KOREAN, 20)
    size = len(path.read_bytes()) - 3
    path.write_bytes(path.read_bytes()[:-3])              # the last '.' and newline gone, and one byte of '다'
    assert fails_with(capfd, ko(path, tmp_path)) == (
        f"{path} ends in the middle of a UTF-8 character (byte {size - 2} of {size}): the file is cut short (a partial "
        "copy or download); restore the whole file, or point dataset.corpus.path at a UTF-8 export of the corpus")


def test_N23_a_byte_order_mark_is_not_part_of_the_first_sentence(tmp_path):
    from langrepr.data.korean.corpus import text_file_sentences

    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + "대한민국의 수도는 서울이다.\n".encode())
    assert text_file_sentences(path, 10) == ["대한민국의 수도는 서울이다."]


def test_N24_a_gzip_corpus_under_a_txt_name_says_decompress_it(tmp_path, capfd):
    path = tmp_path / "k_text" / "news.txt"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(("\n".join(KOREAN) + "\n").encode()))
    assert fails_with(capfd, ko(path, tmp_path)) == (
        f"{path} is gzip-compressed, not text: decompress it with `gunzip -c {path} > {path}.txt && mv {path}.txt "
        f"{path}`, or point dataset.corpus.path at a UTF-8 export of the corpus")


def test_N25_an_empty_korean_corpus_is_one_line_before_any_analysis(tmp_path, capfd):
    path = korean_text(tmp_path / "k_text" / "empty.txt", [""], 5)
    assert fails_with(capfd, ko(path, tmp_path)) == (
        "corpus 'text' is empty: point it at a file with at least one non-empty line")
    assert not (tmp_path / "cache" / "korean_morphemes").exists()


BAD_FILES = [   # (reader, file name, the file's text, the one line it must give with {path})
    pytest.param("langrepr.data.korean.korquad:read_squad_json", "KorQuAD_v1.0_dev.json",
                 json.dumps({"version": "KorQuAD_v1.0_dev", "data": []}),
                 "{path} holds no questions: pass the original KorQuAD_v1.0_*.json file",
                 id="N26_korquad_without_questions_is_one_line"),
    pytest.param("langrepr.data.korean.korquad:read_squad_json", "KorQuAD_v1.0_dev.json",
                 json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "가나다", "qas": [
                     {"id": "q1", "question": "무엇?", "answers": []}]}]}]}, ensure_ascii=False),
                 "{path} is not KorQuAD v1.0 (SQuAD v1.1) JSON (IndexError: list index out of range): pass the "
                 "original KorQuAD_v1.0_*.json file",
                 id="N28_korquad_question_without_answers_is_one_line"),
    pytest.param("langrepr.data.korean.korquad:read_squad_json", "KorQuAD_v1.0_dev.json",
                 json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "가나다", "qas": [
                     {"id": "q1", "question": "무엇?", "answers": [{"text": "라마", "answer_start": 50}]}]}]}]},
                            ensure_ascii=False),
                 "{path}: question q1's answer '라마' is not in its context at answer_start 50: pass the original "
                 "KorQuAD_v1.0_*.json file",
                 id="N29_korquad_answer_outside_its_context_names_the_question"),
    pytest.param("langrepr.data.korean.ner:read_klue_ner", "klue-ner-v1.1_dev.tsv", "",
                 "{path} holds no tagged sentence: point the dataset at a KLUE-NER TSV file",
                 id="N30_an_empty_klue_ner_file_is_one_line"),
    pytest.param("langrepr.data.korean.ner:read_klue_ner", "klue-ner-v1.1_dev.tsv",
                 "## 1\t<서울:LC>\n서\tB-LC\n울\tI-LC\tx\n\n",
                 "{path} line 3: expected one character, a tab and its tag, got '울\\tI-LC\\tx'",
                 id="N31_a_klue_ner_line_with_a_third_column_names_its_line"),
    pytest.param("langrepr.data.korean.ner:read_klue_ner", "klue-ner-v1.1_dev.tsv",
                 "".join(f"## {i}\t가나\n가\tO\n나\tO\n\n" for i in range(5)),
                 "{path}: none of its 5 sentences has an entity (every tag is O): the tag column is missing or the "
                 "file is cut; restore the original KLUE-NER release",
                 id="N32_klue_ner_with_only_the_o_tag_is_one_line"),
    pytest.param("langrepr.data.korean.ner:read_klue_ner", "klue-ner-v1.1_dev.tsv",
                 ("## 1\t<서울:LC>\n서\tB-LC\n울\tI-LC\n\n" * 3)[:-4],
                 "{path} line 11: tag 'I-' is not in the tag set (O, B-/I- of PS, LC, OG, DT, TI, QT); fix the line "
                 "or extend the dataset's types",
                 id="N33_klue_ner_cut_inside_a_tag_names_its_line"),
    pytest.param("langrepr.data.english.gum:read_conllu", "en_gum-ud-train.conllu",
                 "1 the the DET _ _ 2 det _ _\n2 cat cat NOUN _ _ 0 root _ _\n\n",
                 "{path}:1: malformed CoNLL-U line (expected 10 tab-separated columns, got 1)",
                 id="N39_a_gum_file_with_spaces_for_tabs_names_its_first_line"),
    pytest.param("langrepr.data.english.gum:read_conllu", "en_gum-ud-train.conllu",
                 "".join(f"1\tw{i}\tw\tNOUN\t_\t_\t0\troot\t_\t_\n\n" for i in range(4)),
                 "{path}: every token of its 4 sentences has the tag 'NOUN': the UPOS column is missing or the file "
                 "is cut; point LANGREPR_DATA_DIR at the original release",
                 id="N40_gum_with_one_tag_is_one_line"),
    pytest.param("langrepr.data.english.conll:read_conll", "eng.testb", "Paris NNP I-NP I-LOC\nsaw VBD I-VP O\n\nJohn\n",
                 "{path}:4: malformed line 'John': expected 'word ... TAG' columns",
                 id="N41_a_conll_line_with_one_column_names_it"),
]


@pytest.mark.parametrize("reader,name,text,line", BAD_FILES)
def test_a_reader_given_one_bad_file_says_one_line(reader, name, text, line, tmp_path):
    """N26, N28-N33 (KorQuAD, KLUE NER) and N39-N41 (GUM, CoNLL-2003): the file as written, the reader's line."""
    module, function = reader.split(":")
    path = tmp_path / name
    path.write_text(text)
    assert user_error(getattr(importlib.import_module(module), function), path) == line.format(path=path)


def test_N27_korquad_cut_inside_a_character_says_cut_short(tmp_path):
    from langrepr.data.korean.korquad import read_squad_json

    path = tmp_path / "KorQuAD_v1.0_dev.json"
    data = json.dumps({"data": [{"title": "서울", "paragraphs": []}]}, ensure_ascii=False).encode()
    path.write_bytes(data[:data.index("울".encode()) + 1])
    assert user_error(read_squad_json, path).startswith(f"{path} ends in the middle of a UTF-8 character (byte ")
