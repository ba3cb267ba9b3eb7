"""The Korean readers given a file in another encoding, damaged or binary: one line, and the re-encode advice
it gives works.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cases import user_error

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


KOREAN = "대한민국의 수도는 서울이다. 오늘은 날씨가 좋아서 공원에 갔다.\n" * 30


def _korean_file(path: Path, encoding: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(KOREAN.encode(encoding))
    return path


@pytest.mark.parametrize("encoding, shown", [("cp949", "CP949"), ("utf-16", "UTF-16")])
def test_korean_corpus_in_another_encoding_names_file_and_encoding(encoding, shown, tmp_path):   # X16
    from langrepr.data.korean.corpus import text_file_sentences

    path = _korean_file(tmp_path / "k_text" / f"{encoding}.txt", encoding)
    line = user_error(text_file_sentences, path, 1000)
    assert line == (f"{path} is not UTF-8 text (byte 0; it looks like {shown}): re-encode it with `iconv -f {shown} "
                    f"-t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`, or point dataset.corpus.path at a "
                    "UTF-8 export of the corpus")


def test_the_re_encode_advice_works(tmp_path):
    """Run the exact command the line gives; the reader then reads the file."""
    import shutil
    import subprocess

    from langrepr.data.korean.corpus import text_file_sentences

    if shutil.which("iconv") is None:
        pytest.skip("no iconv here")
    path = _korean_file(tmp_path / "k_text" / "cp949.txt", "cp949")
    command = re.search(r"`([^`]+)`", user_error(text_file_sentences, path, 1000)).group(1)
    subprocess.run(command, shell=True, check=True)
    assert text_file_sentences(path, 1000)[:2] == ["대한민국의 수도는 서울이다.", "오늘은 날씨가 좋아서 공원에 갔다."]


def test_the_gzip_re_encode_advice_works(tmp_path):
    import gzip
    import shutil
    import subprocess

    from langrepr.data.english.translation import read_lines

    if shutil.which("iconv") is None:
        pytest.skip("no iconv here")
    path = tmp_path / "train.en.gz"
    with gzip.open(path, "wb") as fh:
        fh.write("a café in Zürich\n".encode("latin-1") * 20)
    line = user_error(read_lines, path)
    assert line.startswith(f"{path} is not UTF-8 text (byte ") and line.endswith(", or re-download it")
    subprocess.run(re.search(r"`([^`]+)`", line).group(1), shell=True, check=True)
    assert read_lines(path)[0] == "a café in Zürich"


def test_quick_corpus_rating_that_is_not_a_number_names_file_and_line(tmp_path):   # X21
    import gzip

    from langrepr.data.korean.corpus import nsmc_neutral_reviews

    path = tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    path.parent.mkdir()
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("review_id\trating\treview\n" + "".join(f"{i}\t6\t좋은 영화 {i}\n" for i in range(5)) + "9\tten\t별로\n")
    assert user_error(nsmc_neutral_reviews, tmp_path, 100) == (
        f"{path} line 7: rating 'ten' is not an integer 1-10; fix or drop that row")
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("review_id\tscore\treview\n1\t6\t좋은 영화\n")
    assert user_error(nsmc_neutral_reviews, tmp_path, 100) == (
        f"{path}: header has no rating column(s) (found ['review_id', 'score', 'review']): the NSMC crawl needs "
        "rating and review columns")


def test_nsmc_crawl_in_another_encoding(tmp_path):
    from langrepr.data.korean.nsmc import read_crawl

    path = tmp_path / "crawl.tsv"
    path.write_bytes(("review_id\trating\treview\n" + "".join(f"{i}\t1\t최악의 영화 {i}\n" for i in range(30)))
                     .encode("cp949"))
    line = user_error(read_crawl, path)
    assert line.startswith(f"{path} is not UTF-8 text") and "CP949" in line


def test_klue_json_damaged_or_in_another_encoding(tmp_path):
    from langrepr.data.korean.corpus import klue_sentences

    klue = tmp_path / "klue"
    klue.mkdir()
    (klue / "klue-nli-v1.1_dev.json").write_text('[{"premise": "가", "hypothesis": "나"}]', encoding="utf-8")
    (klue / "klue-sts-v1.1_dev.json").write_text('[{"sentence": "다"}]', encoding="utf-8")
    assert user_error(klue_sentences, tmp_path, 10) == (
        f"{klue}/klue-sts-v1.1_dev.json is not the KLUE STS dev JSON (a list of records with sentence1 and "
        "sentence2; KeyError: 'sentence1'): restore the original KLUE release")
    (klue / "klue-nli-v1.1_dev.json").write_bytes('[{"premise": "가나다", "hypothesis": "라마바"}]'.encode("utf-16"))
    assert "klue-nli-v1.1_dev.json is not UTF-8 text" in user_error(klue_sentences, tmp_path, 10)


def test_klue_ner_and_korquad_in_another_encoding(tmp_path):
    from langrepr.data.korean.korquad import read_squad_json
    from langrepr.data.korean.ner import read_klue_ner

    tsv = tmp_path / "klue-ner-v1.1_dev.tsv"
    tsv.write_bytes("## 1\t<서울:LC>\n서\tB-LC\n울\tI-LC\n\n".encode("cp949") * 20)
    assert "it looks like" in user_error(read_klue_ner, tsv) and str(tsv) in user_error(read_klue_ner, tsv)
    squad = tmp_path / "KorQuAD_v1.0_dev.json"
    squad.write_bytes('{"data": [{"title": "서울", "paragraphs": []}]}'.encode("utf-16"))
    assert user_error(read_squad_json, squad).startswith(f"{squad} is not UTF-8 text (byte 0; it looks like UTF-16)")


def test_binary_data_is_called_binary(tmp_path):
    from langrepr.data.korean.corpus import text_file_sentences

    path = tmp_path / "blob.txt"
    path.write_bytes(bytes(range(256)) * 8)
    assert user_error(text_file_sentences, path, 10) == (
        f"{path} is not UTF-8 text (byte 128 cannot be decoded; it looks like binary data): put a UTF-8 text file "
        "there, or point dataset.corpus.path at a UTF-8 export of the corpus")
