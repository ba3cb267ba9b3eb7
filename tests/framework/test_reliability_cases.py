"""The reliability case list of issue 21 (`../shared/reliability_cases.md`), re-probed on today's code, and new
cases on the newer papers' data paths (LEAM's Zhang CSVs and NSMC, the Korean corpora, KLUE NER and KorQuAD, the
Bit Cipher corpora and probe files): empty, truncated, another encoding, wrong columns, one class, repeated rows.

Each test is one case, named by its id in the list (`c22`, `X59`, ...) or `N<nn>` for a new one, and asserts the
exact outcome: the exit code, the one `error:` line (no traceback), and that nothing finished is lost or replaced.
Commands run in this process (`langrepr.train.main()`, as `python -m langrepr.train` would) on tiny files written by
`tiny_data`, with `paths.output_root` under the test's tmp folder. A case whose fix belongs to a module another
engineer owns is `xfail(strict=True)` with the line it should give: it turns into a failure once that fix lands.
"""

from __future__ import annotations

import errno
import gzip
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import fails_with, run_main
from tiny_data import write_english_probe_data, write_korean_quick, write_zhang

# ---------------------------------------------------------------- running a command as a user would


def records(root: Path) -> dict[str, dict]:
    """metrics.json of every cell under root (cells moved aside by force=true excluded), by cell folder name."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("metrics.json"))
            if not any(part.startswith(".") for part in p.relative_to(root).parts)}


def user_error(call, *args, **kwargs) -> str:
    from langrepr.errors import UserError

    with pytest.raises(UserError) as err:
        call(*args, **kwargs)
    return str(err.value)


@pytest.fixture(autouse=True)
def own_digest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))


@pytest.fixture(autouse=True)
def fresh_root_logger(monkeypatch):
    """The CLIs' logging.basicConfig writes to this test's stderr, not to an earlier test's closed capture, and our
    loggers are not left disabled by an earlier in-process Hydra run (its logging config disables existing ones)."""
    import logging

    monkeypatch.setattr(logging.root, "handlers", [])
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("langrepr") and isinstance(logger, logging.Logger):
            monkeypatch.setattr(logger, "disabled", False)


def out(tmp_path: Path) -> list[str]:
    return [f"paths.output_root={tmp_path / 'out'}", f"paths.cache_dir={tmp_path / 'cache'}"]


# the bad-input shorthands of the case list, shrunk
S = ["dataset=synthetic", "model=bert_ewe", "debug=smoke"]
LE = ["experiment=leam_table2", "profile=quick", "model=leam", "dataset=ag_news", "++hydra.sweeper.params.seed=1",
      "debug=leam_smoke"]
BC = ["experiment=bitcipher_table1", "profile=quick", "++hydra.sweeper.params.seed=1", "pipeline.probe.epochs=1",
      "pipeline.probe.hidden=8", "bitcipher.corpus.shard_tokens=300", "bitcipher.workers=1",
      "bitcipher.corpus.sources=[{path: ptb/ptb.train.txt}]", "pipeline.vector_defaults.extra_vocab=[]"]
KO_SIZES = ["dataset.token_lists.bpe_size=120", "dataset.token_lists.pos_joined=10", "dataset.token_lists.syllables=40",
            "dataset.token_lists.dictionary_size=40", "pipeline.workers=1"]
KO = ["experiment=multihot_table1", "dataset=modu_newspaper", *KO_SIZES]
PTB_LINES = ["the cat sat on the mat", "john saw the dog in paris", "a big red dog ran home"]


def write_ptb(root: Path, lines: list[str], n: int = 40) -> Path:
    (root / "ptb").mkdir(parents=True, exist_ok=True)
    (root / "ptb" / "ptb.train.txt").write_text("".join(lines[i % len(lines)] + "\n" for i in range(n)))
    return root


# ================================================================ the cases of the list that were not GOOD or OK

def test_c22_an_option_with_dashes_names_the_override_to_write(tmp_path, capfd):
    assert fails_with(capfd, ["debug=smoke", "--profile", "weird"]) == (
        "unknown option '--profile': this command takes key=value overrides, not --options: write profile=weird "
        "(`python -m langrepr.train --help` lists Hydra's own options)")
    assert fails_with(capfd, [*S, "--seed=3"]).startswith("unknown option '--seed': this command takes key=value "
                                                          "overrides, not --options: write seed=3 ")
    from langrepr.train import check_options

    check_options(["-m", "--cfg", "job", "seed=-1", "--multirun"])   # Hydra's own options pass


def test_u12_an_export_without_cpc_codes_says_so(tmp_path, capfd, monkeypatch):
    import pyarrow.parquet as pq

    from langrepr.data.patents.files import write_manifest, write_shard
    from langrepr.data.patents.synthetic import generate

    export = tmp_path / "u_nocpc"
    generate(export, n_train=40, n_test=10, n_subclasses=4, seed=1, shard_rows=32)
    manifest = json.loads((export / "manifest.json").read_text())
    for shard in manifest["shards"]:
        rows = pq.read_table(export / shard["file"]).to_pylist()
        for row in rows:
            row["cpc"] = []
        shard.update(write_shard(export / shard["file"], rows))
    write_manifest(export, manifest)
    line = fails_with(capfd, ["dataset=uspto", "model=bert_ewe", "debug=smoke", f"dataset.datamodule.data_dir={export}",
                              *out(tmp_path)])
    assert line.startswith(f"USPTO export {export}: none of the ") and line.endswith(
        "training documents has a CPC code (every cpc list is empty), so there is nothing to classify: the export "
        "lost its cpc column; re-export (`python -m langrepr.data.patents.export export ...`) or point "
        "LANGREPR_USPTO_DIR at a complete export")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


@pytest.mark.parametrize("case, argv, line", [
    ("X50", ["trainer.limit_train_batches=abc"],
     "trainer.limit_train_batches='abc' is not a batch limit: pass a fraction between 0.0 and 1.0 or a whole number "
     "of batches"),
    ("X51", ["model.net.hidden_size=abc"], "model.net.hidden_size='abc' is not an integer: pass a whole number >= 1"),
    ("X52", ["dataset.datamodule.max_train_samples=many"],
     "dataset.datamodule.max_train_samples='many' is not an integer: pass a whole number >= 0"),
])
def test_wrong_types_are_one_line_before_data(case, argv, line, tmp_path, capfd):
    assert fails_with(capfd, [*S, *argv, *out(tmp_path)]) == line
    assert not (tmp_path / "out").exists()


def test_X59_a_dozen_overrides_name_a_short_cell_folder(tmp_path, capfd):
    """The case's 11 overrides (a 300-byte folder name) on a count cell: it runs, in a folder that fits."""
    many = ["dataset.datamodule.max_train_samples=400", "dataset.datamodule.max_eval_samples=100",
            "trainer.limit_train_batches=90", "trainer.limit_val_batches=20", "optimizer.weight_decay=0.02",
            "scheduler.num_warmup_steps=10", "model.net.hidden_size=96", "model.net.num_layers=2",
            "model.net.intermediate_size=128", "callbacks.last_checkpoint.every_n_train_steps=50",
            "dataset.task.threshold=0.4"]
    count = ["experiment=ewe_table1", "model=bert_ewe"]
    assert run_main([*count, *many, *out(tmp_path)]) == 0, capfd.readouterr().err[-3000:]
    ((name, record),) = records(tmp_path / "out").items()
    assert record["status"] == "finished" and len(name.encode()) <= 200 and ",~" in name
    assert set(many) <= {o.lstrip("+") for o in record["overrides"]}   # the full list is recorded
    # the same command names the same folder (reused), one override more another one
    assert run_main([*count, *many, *out(tmp_path)]) == 0
    assert "this cell already finished" in "".join(capfd.readouterr())
    assert run_main([*count, *many, "model.net.num_heads=4", *out(tmp_path)]) == 0
    assert len(records(tmp_path / "out")) == 2


def test_X59_short_names_are_unchanged_and_long_ones_keep_whole_overrides():
    from langrepr.confpaths import cell_dir_name

    assert cell_dir_name("") == "defaults"
    assert cell_dir_name("dataset=ptb,model=x") == "dataset=ptb,model=x"
    assert cell_dir_name("dataset.corpus.path=/a/b") == "dataset.corpus.path=%2Fa%2Fb"   # issue 33: one folder
    long = ",".join(f"key{i}=value{i}" for i in range(40))
    short = cell_dir_name(long)
    head, digest = short.rsplit(",~", 1)
    assert len(short.encode()) <= 200 and long.startswith(head + ",") and len(digest) == 16
    assert cell_dir_name(long + ",x=1") != short
    path = cell_dir_name("p=/" + "d" * 300)
    assert "/" not in path and len(path.encode()) <= 200


def test_X59_a_slash_in_an_override_value_never_nests_the_cell_folder():
    """Issue 33: `p=/a/b` was the folders `p=` / `a` / `b`; the old name is still computed, to find such a cell."""
    from langrepr.confpaths import cell_dir_name, legacy_cell_dir_name

    for name in ("dataset.corpus.path=/a/b,seed=1", "s=[{path: ptb/ptb.train.txt}],x=1", "p=/" + "d/" * 120):
        assert "/" not in cell_dir_name(name) and len(cell_dir_name(name).encode()) <= 200
    assert legacy_cell_dir_name("dataset.corpus.path=/a/b") == "dataset.corpus.path=/a/b"   # where it was
    long = ",".join(f"key{i}=value{i}" for i in range(40))
    for name in ("", "dataset=ptb,model=x", long, long + ",p=/a", "p=/" + "d" * 300):   # no '/', or shortened
        assert cell_dir_name(name) == legacy_cell_dir_name(name)                       # before: the same folder
    from langrepr.provenance import run_provenance

    # a clean clone rebuilds the command from the folder name
    assert run_provenance(f"nowhere/{cell_dir_name('p=/a/b,seed=1')}")["overrides"] == ["p=/a/b", "seed=1"]


def test_X59_a_cell_with_a_slash_runs_in_one_folder_and_a_cell_nested_before_is_found(tmp_path, capfd):
    """The count cell with a path override: one folder under its run, `.replaced/` beside it (not inside a nest),
    and a finished cell in the nested folder the code before wrote is reused, not run again or counted twice."""
    from langrepr.confpaths import legacy_cell_dir_name

    count = ["experiment=ewe_table1", "model=bert_ewe", f"dataset.datamodule.data_dir={tmp_path}/d/e", *out(tmp_path)]
    assert run_main(count) == 0, capfd.readouterr().err[-3000:]
    run = tmp_path / "out" / "exact" / "ewe_table1"
    (folder,) = [p for p in run.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert "%2F" in folder.name and (folder / "metrics.json").exists()
    legacy = run / legacy_cell_dir_name(folder.name.replace("%2F", "/"))       # as the code before wrote it
    assert legacy.parent != run
    legacy.parent.mkdir(parents=True)
    shutil.move(str(folder), str(legacy))
    before = json.loads((legacy / "metrics.json").read_text())
    capfd.readouterr()
    assert run_main(count) == 0
    assert "this cell already finished" in "".join(capfd.readouterr())
    assert records(tmp_path / "out") == {folder.name: before}                  # moved into its one folder, once
    assert run_main([*count, "force=true"]) == 0
    (aside,) = (run / ".replaced").iterdir()
    assert aside.name.startswith(folder.name + "@") and (aside / "metrics.replaced.json").exists()


def test_X40_explain_of_a_table_that_does_not_exist_says_unknown_table(capsys):
    from langrepr.confpaths import group_options
    from langrepr.tables import main

    with pytest.raises(SystemExit) as exit_:
        main(["explain", "tensorcoder_table9", "Transformer-1head", "PTB valid loss"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err == ("error: unknown table 'tensorcoder_table9': no rendered table 'tensorcoder_table9' in "
                   "outputs/tables and no conf/experiment/tensorcoder_table9.yaml; choose one of "
                   f"{', '.join(group_options('experiment'))}\n")


def _toy_outputs(root: Path) -> Path:
    """outputs/ with one rendered toy table whose cell names one run folder (with a CSV log)."""
    run = root / "outputs" / "quick" / "toy" / "model=a,seed=1"
    (run / "csv").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"status": "finished", "commit": "abc", "metrics": {"test/f1": 0.5}}))
    (run / "csv" / "metrics.csv").write_text("epoch,step,train/loss,val/loss\n0,0,1.0,\n0,1,0.8,\n0,1,,0.9\n")
    table = {"table": "toy", "title": "Toy", "profile": "quick", "commit": "abc", "columns": ["F1"], "seeds": [1],
             "rows": [{"key": "A", "cells": {"F1": {"ours": 0.5, "paper": None, "std": None, "n": 1,
                                                    "runs": [str(run)]}}}], "claims": []}
    (root / "outputs" / "tables").mkdir(parents=True)
    (root / "outputs" / "tables" / "toy.quick.json").write_text(json.dumps(table))
    (root / "outputs" / "tables" / "toy.quick.md").write_text("# Toy\n\n| | F1 |\n|---|---|\n| A | 0.5 |\n")
    return root / "outputs"


def run_report(argv: list[str], capsys=None) -> tuple[int, str, str]:
    """`python -m langrepr.report <argv>` in a fresh interpreter (its own logging, as a user runs it)."""
    from conftest import run_cli

    done = run_cli("langrepr.report", *argv, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_X35_the_report_never_shows_a_partial_render_as_a_table(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    tables = outputs / "tables"
    table = json.loads((tables / "toy.quick.json").read_text())
    (tables / "toy.quick.partial.json").write_text(json.dumps({**table, "seeds": []}))
    (tables / "toy.quick.partial.md").write_text("# Toy (partial)\n")
    code, _, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 0, err
    md = (outputs / "report" / "report.md").read_text()
    assert md.count("| [toy](") == 1 and "Toy (partial)" not in md and "toyquickpartial" not in md
    # ignored entirely, not even named: a git-ignored file must not make this machine's report differ from a clone's
    (tables / "toy.quick.partial.json").unlink()
    assert run_report(["--outputs", str(outputs)], capsys)[0] == 0
    assert (outputs / "report" / "report.md").read_text() == md


def test_X36_a_damaged_run_record_leaves_out_its_curve_with_a_warning(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    run = outputs / "quick" / "toy" / "model=a,seed=1"
    (run / "metrics.json").write_text('{"status": "fini')
    code, printed, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 0 and "Traceback" not in err
    assert err.splitlines() == [f"warning: skipping {run / 'metrics.json'}: unreadable (JSONDecodeError); its curve "
                                "is left out (rerun that cell with force=true)"]
    assert printed.startswith("wrote ") and "| [toy](" in (outputs / "report" / "report.md").read_text()


def test_X37_a_damaged_table_json_is_one_line_and_the_report_is_kept(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    (outputs / "report").mkdir()
    (outputs / "report" / "report.md").write_text("the committed report\n")
    path = outputs / "tables" / "toy.quick.json"
    path.write_text(path.read_text()[:60])
    code, _, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 2 and err == (
        f"error: {path} is damaged (not the JSON `langrepr.tables` writes: JSONDecodeError): restore it (`git checkout "
        f"-- {path}`) or re-render it (`python -m langrepr.tables toy --profile quick`); the report on disk is "
        "untouched\n")
    assert (outputs / "report" / "report.md").read_text() == "the committed report\n"


def test_X43_tables_on_a_read_only_folder_is_one_line(tmp_path, capsys, monkeypatch):
    import langrepr.tables as tables

    def read_only(path, *_):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(tables, "write_json_atomic", read_only)
    with pytest.raises(SystemExit) as exit_:
        tables.main(["leam_table3", "--profile", "quick", "--outputs", str(tmp_path / "ro")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[-1] == (
        f"error: cannot write {tmp_path / 'ro' / 'tables' / 'leam_table3.quick.partial.json'}: Read-only file system; pass "
        "--outputs <a writable folder holding the run folders> (the tables already on disk are untouched)")
    assert "Traceback" not in err


def test_X43_tables_and_report_under_a_file_are_one_line(tmp_path, capsys):
    from langrepr.tables import main

    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_:
        main(["leam_table3", "--profile", "quick", "--outputs", str(tmp_path / "afile")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[-1].startswith(f"error: cannot write {tmp_path / 'afile'}")
    outputs = _toy_outputs(tmp_path)
    code, _, err = run_report(["--outputs", str(outputs), "--out", str(tmp_path / "afile" / "rep")], capsys)
    assert code == 2 and err.startswith(f"error: cannot write {tmp_path / 'afile'}") and err.endswith(
        "pass --out <a writable folder> (the report on disk is untouched)\n")


def test_X48_a_cache_dir_that_cannot_be_written_names_paths_cache_dir(tmp_path, capfd, monkeypatch):
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro else real(p, mode))
    assert fails_with(capfd, [*S, f"paths.output_root={tmp_path / 'out'}", f"paths.cache_dir={ro / 'cache'}"]) == (
        f"paths.cache_dir={ro / 'cache'} is not writable ({ro} is read-only): pass paths.cache_dir=<a writable folder>")
    (tmp_path / "afile").write_text("x")
    assert fails_with(capfd, [*S, f"paths.output_root={tmp_path / 'out'}",
                              f"paths.cache_dir={tmp_path / 'afile' / 'cache'}"]) == (
        f"paths.cache_dir={tmp_path / 'afile' / 'cache'} lies under {tmp_path / 'afile'}, which is a file: pass "
        "paths.cache_dir=<a writable folder>")
    assert not (tmp_path / "out").exists()


def test_X23_a_missing_python_module_is_one_line_naming_it(tmp_path, capfd, monkeypatch):
    """kiwipiepy without its model package, on a corpus no analysis is cached for."""
    corpus = tmp_path / "k_text" / "small.txt"
    corpus.parent.mkdir()
    corpus.write_text("대한민국의 수도는 서울이다.\n오늘은 날씨가 좋다.\n" * 10, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "kiwipiepy_model", None)         # `import kiwipiepy_model` fails
    import kiwipiepy

    from langrepr.data.korean import morphemes
    monkeypatch.setattr(morphemes, "_WORKER_KIWI", None)   # an earlier test's in-process analyser must not answer

    monkeypatch.setattr(kiwipiepy, "Kiwi", _kiwi_without_model)
    line = fails_with(capfd, [*KO, "profile=quick", f"dataset.corpus.path={corpus}", *out(tmp_path)])
    assert line.endswith(" needs the Python module 'kiwipiepy_model', which is not installed: pip install "
                         "kiwipiepy_model (`make install` installs the project's dependencies)")
    assert [r["status"] for r in records(tmp_path / "out").values()] == ["failed"]


def _kiwi_without_model(*args, **kwargs):
    import kiwipiepy_model  # noqa: F401  (what kiwipiepy imports for its default model)


def test_X25_the_hub_out_of_reach_is_one_line(tmp_path, capfd, monkeypatch):
    """A cell that reads a hub data set with HF_*_OFFLINE set: the line says to go online or read local copies."""
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'squad_kor_v1' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    line = fails_with(capfd, [*KO, "profile=quick", "dataset.corpus.source=hub:someone/korean_news", *out(tmp_path)])
    assert line.endswith(" could not reach the Hugging Face Hub (ConnectionError: Couldn't reach 'squad_kor_v1' on "
                         "the Hub (OfflineModeIsEnabled)): go online (unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE), "
                         "or point the cell's data settings at local copies (LANGREPR_DATA_DIR)")


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
