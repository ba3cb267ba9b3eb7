"""Bit Cipher cells and readers on bad data: vectors follow the data folder, damaged partials, empty or cut
corpus sources, probe files with one tag or another encoding.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cases import BC, PTB_LINES, out, records, user_error, write_ptb
from conftest import fails_with, run_main
from tiny_data import write_english_probe_data

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


# ---------------------------------------------------------------- Bit Cipher cells: vectors follow the data (X06-X08)

@pytest.fixture(scope="module")
def bc_folders(tmp_path_factory) -> dict[str, Path]:
    """Two data folders laid out like shared/data: the tiny probe files, and 40 vs 120 lines of corpus text."""
    root = tmp_path_factory.mktemp("bc")
    one = write_english_probe_data(write_ptb(root / "b_ok", PTB_LINES, 40))
    other = write_english_probe_data(write_ptb(root / "b_other", PTB_LINES + ["paris is big and the cat is red"], 120))
    return {"b_ok": one, "b_other": other}


def bc(data: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [*BC, "bitcipher_vectors=sum", "bitcipher_vectors.bits=8", f"paths.data_dir={data}", *out(tmp_path), *extra]


def vectors_of(tmp_path: Path, run_id: str) -> dict:
    ((_, record),) = [(k, r) for k, r in records(tmp_path / "out" / "quick" / run_id).items()]
    return record


def test_X06_vectors_built_from_one_data_folder_are_not_reused_for_another(bc_folders, tmp_path, capfd):
    assert run_main(bc(bc_folders["b_ok"], tmp_path, "run_id=bc_sum")) == 0, capfd.readouterr().err[-3000:]
    assert run_main(bc(bc_folders["b_other"], tmp_path, "run_id=bc_other")) == 0, capfd.readouterr().err[-3000:]
    first, second = vectors_of(tmp_path, "bc_sum"), vectors_of(tmp_path, "bc_other")
    assert first["metrics"]["vectors/corpus_docs"] == 40 and second["metrics"]["vectors/corpus_docs"] == 120
    assert first["metrics"]["vectors/corpus_tokens"] < second["metrics"]["vectors/corpus_tokens"]
    assert len(list((tmp_path / "out" / "quick" / "bitcipher_vectors").iterdir())) == 2   # two artefacts


def test_X07_X08_changed_corpus_refuses_the_finished_cell_and_force_rebuilds_the_vectors(tmp_path, capfd):
    data = write_english_probe_data(write_ptb(tmp_path / "b_mut", PTB_LINES, 40))
    assert run_main(bc(data, tmp_path, "run_id=bc_mut")) == 0, capfd.readouterr().err[-3000:]
    before = vectors_of(tmp_path, "bc_mut")
    write_ptb(data, PTB_LINES + ["paris is big and the cat is red"], 120)            # X07: 3x the text
    capfd.readouterr()
    line = fails_with(capfd, bc(data, tmp_path, "run_id=bc_mut"))
    assert "changed since it finished" in line and "ptb.train.txt" in line and "force=true" in line
    assert vectors_of(tmp_path, "bc_mut") == before                                  # nothing lost
    assert run_main(bc(data, tmp_path, "run_id=bc_mut", "force=true")) == 0          # X08: the new corpus's vectors
    after = vectors_of(tmp_path, "bc_mut")
    assert after["metrics"]["vectors/corpus_docs"] == 120 and before["metrics"]["vectors/corpus_docs"] == 40
    moved = list((tmp_path / "out" / "quick" / "bc_mut").rglob(".replaced/*/metrics.replaced.json"))
    assert [json.loads(p.read_text())["metrics"] for p in moved] == [before["metrics"]]



def test_X10_a_damaged_co_occurrence_partial_is_named_and_the_rest_is_kept(bc_folders, tmp_path, capfd):
    """A vector build stopped after its partials (manifest not written), one partial cut in half, then rerun."""
    args = [a.replace("shard_tokens=300", "shard_tokens=100") for a in bc(bc_folders["b_ok"], tmp_path)]
    args.append("+bitcipher_vectors.group_shards=1")                            # 3 shards, 3 partials
    assert run_main([*args, "run_id=bc_ref"]) == 0, capfd.readouterr().err[-3000:]
    reference = vectors_of(tmp_path, "bc_ref")["metrics"]
    (artefact,) = (tmp_path / "out" / "quick" / "bitcipher_vectors").iterdir()
    (artefact / "manifest.json").unlink()                                       # the build never finished
    partials = sorted((artefact / "work" / "partials").iterdir())
    assert len(partials) > 1
    partials[1].write_bytes(partials[1].read_bytes()[: len(partials[1].read_bytes()) // 2])
    capfd.readouterr()
    assert fails_with(capfd, [*args, "run_id=bc_again"]) == (
        f"co-occurrence partial {partials[1]} is damaged (BadZipFile): delete it and run the same command again (the "
        "other partials are kept; only its shards are counted again)")
    partials[1].unlink()
    assert run_main([*args, "run_id=bc_again"]) == 0, capfd.readouterr().err[-3000:]
    again = vectors_of(tmp_path, "bc_again")["metrics"]
    assert {k: v for k, v in again.items() if "_s" not in k} == {k: v for k, v in reference.items() if "_s" not in k}
    assert sorted((artefact / "work" / "partials").iterdir()) == partials


# ---------------------------------------------------------------- Bit Cipher: corpus sources and probe files (N34-N43)

def test_N34_an_empty_corpus_source_among_others_is_one_line(tmp_path):
    from langrepr.data.english.corpus import iter_documents

    (tmp_path / "a.txt").write_text("the cat sat\n")
    (tmp_path / "empty.txt").write_text("\n  \n")
    assert user_error(lambda: list(iter_documents([{"path": "a.txt"}, {"path": "empty.txt"}], tmp_path))) == (
        f"corpus source {tmp_path / 'empty.txt'} holds no text (empty, or every line blank): restore it or drop it from "
        "bitcipher.corpus.sources")


def test_N35_a_bit_cipher_cell_with_an_empty_corpus_file_stops_before_any_vectors(bc_folders, tmp_path, capfd):
    data = tmp_path / "b_empty"
    shutil.copytree(bc_folders["b_ok"], data)
    (data / "ptb" / "ptb.train.txt").write_text("")
    assert fails_with(capfd, bc(data, tmp_path)) == (
        f"corpus source {data / 'ptb' / 'ptb.train.txt'} holds no text (empty, or every line blank): restore it or "
        "drop it from bitcipher.corpus.sources")
    assert not list((tmp_path / "out").rglob("vectors.npy"))                 # no vectors from the other files


def test_N36_a_corpus_file_cut_inside_a_character_says_cut_short(tmp_path):
    from langrepr.data.english.corpus import iter_documents

    data = "a café in zürich\n".encode() * 5 + "one more café".encode()[:-1]   # é's second byte cut off
    (tmp_path / "c.txt").write_bytes(data)
    line = user_error(lambda: list(iter_documents([{"path": "c.txt"}], tmp_path)))
    assert line == (f"{tmp_path / 'c.txt'} ends in the middle of a UTF-8 character (byte {len(data) - 1} of "
                    f"{len(data)}): the file is cut short (a partial copy or download); restore the whole file, or drop "
                    "it from bitcipher.corpus.sources")


def test_N37_an_empty_gum_test_file_is_one_line(tmp_path):
    from langrepr.data.english.gum import gum_splits

    data = write_english_probe_data(tmp_path)
    test = data / "ud_english_gum" / "r2.5" / "en_gum-ud-test.conllu"
    test.write_text("# newdoc\n\n")
    assert user_error(gum_splits, data) == f"{test} holds no sentences: check the file (empty split)"


def test_N38_a_gum_file_cut_inside_a_line_names_it(tmp_path):
    from langrepr.data.english.gum import read_conllu

    data = write_english_probe_data(tmp_path)
    dev = data / "ud_english_gum" / "r2.5" / "en_gum-ud-dev.conllu"
    dev.write_text(dev.read_text()[:-30])
    lines = dev.read_text().splitlines()
    assert user_error(read_conllu, dev) == (
        f"{dev}:{len(lines)}: malformed CoNLL-U line (expected 10 tab-separated columns, got "
        f"{len(lines[-1].split(chr(9)))})")


def test_N42_repeated_probe_sentences_are_read_as_they_are(tmp_path):
    from langrepr.data.english.conll import read_conll

    path = tmp_path / "eng.train"
    path.write_text("Paris NNP I-NP I-LOC\nsaw VBD I-VP O\n\n" * 3)
    assert read_conll(path) == [(["Paris", "saw"], ["I-LOC", "O"])] * 3


def test_N43_a_bit_cipher_cell_whose_ner_test_file_is_in_another_encoding_stops_with_one_line(bc_folders, tmp_path,
                                                                                           capfd):
    data = tmp_path / "b_enc"
    shutil.copytree(bc_folders["b_ok"], data)
    testb = data / "conll2003" / "eng.testb"
    testb.write_bytes(testb.read_text().replace("Paris", "Zürich").encode("utf-16"))
    line = fails_with(capfd, [*BC, "bitcipher_vectors=majority", f"paths.data_dir={data}", *out(tmp_path)])
    assert line.startswith(f"{testb} is not UTF-8 text (byte 0; it looks like UTF-16): re-encode it with `iconv -f "
                           "UTF-16 -t UTF-8 ") and line.endswith("or point LANGREPR_DATA_DIR at the original release")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


def test_probe_data_with_one_tag_or_another_encoding(tmp_path):
    from langrepr.data.english.conll import read_conll
    from langrepr.data.english.gum import read_conllu

    conll = tmp_path / "eng.train"
    conll.write_text("".join(f"w{i} NN I-NP O\nv{i} VB I-VP O\n\n" for i in range(5)))
    assert user_error(read_conll, conll) == (
        f"{conll}: every token of its 5 sentences has the tag 'O': the NER column is missing or the file is cut; "
        "point LANGREPR_DATA_DIR at the original release")
    conll.write_bytes("Zürich NNP I-NP I-LOC\n\n".encode("utf-16") * 3)
    assert user_error(read_conll, conll).startswith(f"{conll} is not UTF-8 text (byte 0; it looks like UTF-16)")
    gum = tmp_path / "en_gum-ud-train.conllu"
    gum.write_bytes("".join("1\tcafé\tcafé\tNOUN\t_\t_\t0\troot\t_\t_\n\n" for _ in range(3)).encode("latin-1"))
    line = user_error(read_conllu, gum)
    assert line.startswith(f"{gum} is not UTF-8 text (byte ") and "point LANGREPR_DATA_DIR at the original" in line


def test_bit_cipher_corpus_sources(tmp_path):
    import gzip

    from langrepr.data.english.corpus import iter_documents

    (tmp_path / "agnews").mkdir()
    (tmp_path / "agnews" / "test.csv").write_text('"1","title"\n')
    source = {"path": "agnews/test.csv", "format": "csv", "text_columns": [1, 2]}
    assert user_error(lambda: list(iter_documents([source], tmp_path))) == (
        f"{tmp_path}/agnews/test.csv line 1 has 2 column(s) but the corpus source reads text_columns [1, 2]: fix "
        "the source's text_columns or the file")
    (tmp_path / "ptb.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1") * 30)
    line = user_error(lambda: list(iter_documents([{"path": "ptb.txt"}], tmp_path)))
    assert line.startswith(f"{tmp_path}/ptb.txt is not UTF-8 text (byte 3") and line.endswith(
        "or drop it from bitcipher.corpus.sources")
    with gzip.open(tmp_path / "m.gz", "wt") as fh:
        fh.write("some text\n" * 2000)
    (tmp_path / "m.gz").write_bytes((tmp_path / "m.gz").read_bytes()[:40])
    assert user_error(lambda: list(iter_documents([{"path": "m.gz"}], tmp_path))) == (
        f"{tmp_path}/m.gz is a damaged gzip file (EOFError): re-download it or drop it from bitcipher.corpus.sources")


def test_ptb_in_another_encoding_names_it(tmp_path):
    from langrepr.data.english.text_lm import read_local_lines

    (tmp_path / "ptb.train.txt").write_bytes("the café of w1 N\n".encode("cp1252") * 20)
    line = user_error(read_local_lines, tmp_path, "ptb.train.txt")
    assert line.startswith(f"{tmp_path}/ptb.train.txt is not UTF-8 text (byte 7; it looks like ")
    assert line.endswith("or point data_dir at the original corpus") and "iconv -f" in line
