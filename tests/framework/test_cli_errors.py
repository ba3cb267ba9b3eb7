"""Bad input gets one clear line, a non-zero exit and no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import run_cli


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


def test_unknown_model_lists_the_choices():
    result = run_cli("langrepr.train", "model=no_such_model")
    line = one_line_error(result)
    assert "unknown model 'no_such_model': choose one of" in line and "bert_ewe" in line


def test_missing_data_path_says_how_to_fix(tmp_path):
    line = one_line_error(run_cli("langrepr.train", "dataset=uspto", "model=bert_ewe", "debug=smoke",
                                  f"dataset.datamodule.data_dir={tmp_path / 'nowhere'}",
                                  f"paths.output_root={tmp_path / 'out'}"))
    assert "nowhere" in line


@pytest.mark.parametrize("args", [("langrepr.tables", "no_such_table")])
def test_unknown_table(args):
    line = one_line_error(run_cli(*args))
    assert "unknown table" in line


def test_empty_split_is_reported(tmp_path):
    line = one_line_error(run_cli("langrepr.train", "dataset=synthetic", "model=bert_ewe", "debug=smoke",
                                  "dataset.datamodule.max_train_samples=0", f"paths.output_root={tmp_path}",
                                  f"paths.cache_dir={tmp_path / 'cache'}"))
    assert "empty" in line.lower()


def test_unknown_choice_of_a_paper_config_group_lists_the_choices():
    from langrepr.errors import UserError
    from langrepr.train import check_group_choices

    with pytest.raises(UserError, match="unknown bitcipher_vectors 'nope': choose one of .*cipher"):
        check_group_choices(["bitcipher_vectors=nope"])


def test_a_misspelled_model_gets_the_closest_name_first_in_a_short_line(tmp_path):
    """`model=bert_eew`: the first line names bert_ewe and stays short; the 41 names come on the next line."""
    run = subprocess.run([sys.executable, "-m", "langrepr.train", "model=bert_eew", "debug=smoke"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    first, second = run.stderr.strip().splitlines()[:2]
    assert first.startswith("error: unknown model 'bert_eew': did you mean bert_ewe") and len(first) < 200, first
    assert "all model options:" in second and "leam" in second
