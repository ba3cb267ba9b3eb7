"""LEAM's readers (the Zhang et al. CSVs) and cells on bad data: a missing or stray class, another encoding,
wrong columns, empty or cut files, permuted labels, repeated rows.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cases import LE, error_lines, out, records, user_error
from conftest import fails_with, run_main
from tiny_data import write_zhang

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


# ---------------------------------------------------------------- LEAM cells: the Zhang CSVs (X28, X30, X34)

@pytest.fixture
def agnews(tmp_path) -> Path:
    """An AG News folder (test.csv only, as the quick profile reads it): 20 rows per class."""
    write_zhang(tmp_path / "data" / "agnews", per_class=20)
    (tmp_path / "data" / "agnews" / "train.csv").unlink()
    return tmp_path / "data"


def le(data: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [*LE, f"paths.data_dir={data}", *out(tmp_path), *extra]


def rewrite_rows(path: Path, keep=lambda row: True, extra: list | None = None) -> None:
    import csv

    rows = [r for r in csv.reader(path.open(newline="")) if keep(r)] + (extra or [])
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)


def test_X28_the_last_class_missing_is_named(agnews, tmp_path, capfd):
    test_csv = agnews / "agnews" / "test.csv"
    rewrite_rows(test_csv, keep=lambda r: r[0] != "4")
    line = fails_with(capfd, le(agnews, tmp_path))
    assert line.startswith(f"ag_news ({test_csv}): class 4 (Science) has no training rows (")
    assert "class names for" not in line


def test_X30_a_stray_label_names_its_row(agnews, tmp_path, capfd):
    test_csv = agnews / "agnews" / "test.csv"
    rewrite_rows(test_csv, extra=[["7", "stray", "row"]])
    assert fails_with(capfd, le(agnews, tmp_path)) == (
        f"{test_csv}:81 has class 7 but the data set has 4 classes (dataset.datamodule.class_names): fix or drop that row")


def test_X34_permuted_labels_refuse_the_finished_leam_cell(agnews, tmp_path, capfd):
    assert run_main(le(agnews, tmp_path, "run_id=leam_mut")) == 0, capfd.readouterr().err[-3000:]
    (before,) = records(tmp_path / "out").values()
    test_csv = agnews / "agnews" / "test.csv"
    text = test_csv.read_text()
    test_csv.write_text(text.replace('"1",', '"X",').replace('"4",', '"1",').replace('"X",', '"4",')
                        .replace('"2",', '"Y",').replace('"3",', '"2",').replace('"Y",', '"3",'))
    capfd.readouterr()
    line = fails_with(capfd, le(agnews, tmp_path, "run_id=leam_mut"))
    assert "changed since it finished" in line and "test.csv" in line and "force=true" in line
    assert list(records(tmp_path / "out").values()) == [before]                       # the finished record kept


# ================================================================ new cases: the newer papers' data paths
# ---------------------------------------------------------------- LEAM: Zhang et al. CSVs (N01-N14)

GOOD_ROWS = '"1","ball team","match goal"\n"2","market bank","stock profit"\n"3","vote law","election war"\n'


def zhang_file(tmp_path: Path, content: bytes | str, name: str = "test.csv") -> Path:
    path = tmp_path / "agnews" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def read_zhang(path: Path):
    from langrepr.data.classification.sources import read_zhang_csv

    return read_zhang_csv(path, 4)


def test_N01_a_byte_order_mark_is_not_part_of_the_first_class_index(tmp_path):
    path = zhang_file(tmp_path, b"\xef\xbb\xbf" + GOOD_ROWS.encode())
    assert read_zhang(path) == (["ball team match goal", "market bank stock profit", "vote law election war"], [0, 1, 2])


def test_N02_a_csv_cut_inside_a_quoted_field_is_one_line(tmp_path):
    path = zhang_file(tmp_path, GOOD_ROWS + '"4","chip software","phone da')
    assert user_error(read_zhang, path) == (
        f"{path} ends inside a quoted field (after line 4): the file is cut short; restore the whole CSV or point "
        "dataset.datamodule.data_dir at the original CSVs")


def test_N03_an_empty_csv_is_one_line(tmp_path):
    path = zhang_file(tmp_path, b"")
    assert user_error(read_zhang, path) == f"{path} is empty: it must hold one labelled row per line"


def test_N04_blank_lines_are_skipped_and_a_file_of_blank_lines_is_empty(tmp_path):
    path = zhang_file(tmp_path, GOOD_ROWS + "\n\n" + GOOD_ROWS + "\n")
    assert read_zhang(path)[1] == [0, 1, 2, 0, 1, 2]
    path = zhang_file(tmp_path, "\n\n\n")
    assert user_error(read_zhang, path) == f"{path} is empty: it must hold one labelled row per line"


def test_N05_rows_with_only_the_class_column_filled_are_one_line(tmp_path):
    path = zhang_file(tmp_path, '"1","",""\n"2","",""\n"3"," ",""\n')
    assert user_error(read_zhang, path) == (
        f"{path}: every one of its 3 rows has empty text fields (only the class column is filled): the text columns "
        "were lost; restore the original CSV")


def test_N06_a_tab_separated_file_is_called_tab_separated(tmp_path):
    path = zhang_file(tmp_path, GOOD_ROWS.replace('","', '"\t"'))
    assert user_error(read_zhang, path) == (
        f"{path}:1 is not a Zhang et al. row (class index >= 1, then text fields): "
        "['1\\t\"ball team\"\\t\"match goal\"'] (tab-separated? the Zhang et al. files are comma-separated, quoted CSV)")


def test_N07_a_gzip_file_under_the_csv_name_says_decompress_it(tmp_path):
    path = zhang_file(tmp_path, gzip.compress(GOOD_ROWS.encode()))
    assert user_error(read_zhang, path) == (
        f"{path} is gzip-compressed, not text: decompress it with `gunzip -c {path} > {path}.txt && mv {path}.txt "
        f"{path}`, or point dataset.datamodule.data_dir at the original CSVs")


def test_N08_a_latin1_csv_names_the_encoding_and_the_command(tmp_path):
    path = zhang_file(tmp_path, GOOD_ROWS.replace("match", "café Zürich").encode("latin-1"))
    assert user_error(read_zhang, path) == (
        f"{path} is not UTF-8 text (byte 20; it looks like CP1252): re-encode it with `iconv -f CP1252 -t UTF-8 "
        f"{path} > {path}.utf8 && mv {path}.utf8 {path}`, or point dataset.datamodule.data_dir at the original CSVs")


def test_N09_class_index_zero_is_one_line(tmp_path):
    path = zhang_file(tmp_path, GOOD_ROWS + '"0","zero","row"\n')
    assert user_error(read_zhang, path) == (
        f"{path}:4 is not a Zhang et al. row (class index >= 1, then text fields): ['0', 'zero']")


def test_N10_a_leam_cell_whose_data_has_one_class_stops_with_one_line(agnews, tmp_path, capfd):
    test_csv = agnews / "agnews" / "test.csv"
    rewrite_rows(test_csv, keep=lambda r: r[0] == "2")
    assert fails_with(capfd, le(agnews, tmp_path)) == (
        f"ag_news ({test_csv}): class 1 (World), 3 (Business), 4 (Science) has no training rows (16 rows, classes 1-4): "
        "the data is cut or filtered; restore the missing rows or point dataset.datamodule.data_dir at the full data")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


def test_N11_repeated_rows_never_straddle_the_train_test_cut(tmp_path):
    from langrepr.data.classification.sources import read_local

    once = zhang_file(tmp_path / "once", "".join(f'"{1 + i % 4}","title {i}","text {i}"\n' for i in range(40)))
    twice = zhang_file(tmp_path / "twice", once.read_text() * 2)
    single, _ = read_local(once.parent, 0.25, 0, 4)
    doubled, info = read_local(twice.parent, 0.25, 0, 4)
    assert info["duplicate_rows_dropped"] == 40 and doubled == single       # the same split as the file once
    assert not set(doubled["train"][0]) & set(doubled["test"][0])


def test_N12_crlf_line_ends_read_as_the_same_rows(tmp_path):
    assert read_zhang(zhang_file(tmp_path, GOOD_ROWS.replace("\n", "\r\n"))) == read_zhang(
        zhang_file(tmp_path / "lf", GOOD_ROWS))


def test_N13_an_official_folder_without_its_test_csv_names_the_file(tmp_path):
    from langrepr.data.classification.sources import read_local

    zhang_file(tmp_path, GOOD_ROWS, name="train.csv")
    assert user_error(read_local, tmp_path / "agnews", None, 0, 4) == (
        f"{tmp_path / 'agnews' / 'test.csv'} does not exist: point dataset.datamodule.data_dir at a folder with the "
        "Zhang et al. CSVs")


def test_N14_a_leam_cell_on_an_empty_test_csv_stops_with_one_line(agnews, tmp_path, capfd):
    test_csv = agnews / "agnews" / "test.csv"
    test_csv.write_bytes(b"")
    assert fails_with(capfd, le(agnews, tmp_path)) == f"{test_csv} is empty: it must hold one labelled row per line"
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


TOPICS = {1: "world leaders summit treaty", 2: "match season team coach", 3: "market shares profit bank",
          4: "software chip research lab"}


def write_agnews(folder: Path, rows_per_class: int = 12, classes=(1, 2, 3, 4), extra: list | None = None) -> Path:
    import csv

    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "test.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        for i in range(rows_per_class):
            for label in classes:
                words = TOPICS[label].split()
                writer.writerow([label, f"{words[i % 4]} news {i}", " ".join(words)])
        for row in extra or []:
            writer.writerow(row)
    return folder / "test.csv"


def ag_news_module(folder: Path, **kw):
    from langrepr.data.classification.datamodule import TextClassificationDataModule
    from langrepr.data.classification.vocab import WordTokenizer

    args = dict(name="ag_news", data_dir=str(folder), class_names=["World", "Sports", "Business", "Science"],
                tokenizer=WordTokenizer(max_length=8, max_vocab=100), batch_size=5, split_test_fraction=0.25,
                val_fraction=0.2)
    return TextClassificationDataModule(**{**args, **kw})


def test_a_class_with_no_rows_is_one_line(tmp_path):                     # X27
    write_agnews(tmp_path / "agnews", classes=(1, 2, 4))
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"ag_news ({tmp_path}/agnews/test.csv): class 3 (Business) has no training rows (27 rows, classes 1-4): the "
        "data is cut or filtered; restore the missing rows or point dataset.datamodule.data_dir at the full data")


def test_the_last_class_missing_is_named_not_blamed_on_the_class_names(tmp_path):   # X28
    write_agnews(tmp_path / "agnews", classes=(1, 2, 3))
    line = user_error(ag_news_module(tmp_path / "agnews").setup, "fit")
    assert "class 4 (Science) has no training rows" in line and "class names for" not in line


def test_a_stray_label_names_its_row(tmp_path):                           # X30
    path = write_agnews(tmp_path / "agnews", extra=[[7, "stray", "row"]])
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:49 has class 7 but the data set has 4 classes (dataset.datamodule.class_names): fix or drop that row")


def test_a_stray_label_without_class_names_leaves_empty_classes(tmp_path):
    write_agnews(tmp_path / "agnews", extra=[[7, "stray", "row"]] * 4)
    line = user_error(ag_news_module(tmp_path / "agnews", class_names=None).setup, "fit")
    assert "class 5, 6 has no training rows" in line


def test_a_header_line_is_named(tmp_path):
    path = tmp_path / "agnews" / "test.csv"
    write_agnews(tmp_path / "agnews")
    path.write_text('"Class Index","Title","Description"\n' + path.read_text())
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:1 is not a Zhang et al. row (class index >= 1, then text fields): ['Class Index', 'Title'] (a header "
        "line? the Zhang et al. files have none: delete it)")


def test_wrong_columns_are_named(tmp_path):
    path = write_agnews(tmp_path / "agnews", extra=[[2, "only a title"]])
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:49 has 2 fields where line 1 has 3: a wrong column count (an unquoted comma?); fix that row")


def test_csv_in_another_encoding_names_file_and_encoding(tmp_path):
    path = write_agnews(tmp_path / "agnews")
    path.write_bytes(path.read_text().replace("news", "뉴스").encode("cp949"))
    line = user_error(ag_news_module(tmp_path / "agnews").setup, "fit")
    assert line.startswith(f"{path} is not UTF-8 text (byte ") and "it looks like CP949" in line


def test_leam_cell_with_an_empty_class_stops_with_one_line(tmp_path, capfd, monkeypatch):   # X27 end to end
    write_agnews(tmp_path / "data" / "agnews", rows_per_class=20, classes=(1, 2, 4))
    monkeypatch.setenv("LANGREPR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    code = run_main([*LE, f"paths.output_root={tmp_path}/out", f"paths.cache_dir={tmp_path}/cache"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = error_lines(err)
    assert "class 3 (Business) has no training rows" in line
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("metrics.json")]
    assert [r["status"] for r in records] == ["failed"]
