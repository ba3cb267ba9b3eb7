"""The grid (issue 24): cells composed from dataset x input x encoder, the composition rule, a new input added by one
config file, the renderer on fixture runs, and `make grid`'s sweeps at smoke size."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import CONF_DIR, ROOT, fails_with
from langrepr import grid
from langrepr.train import train

DATA = Path(os.environ["LANGREPR_DATA_DIR"]) if os.environ.get("LANGREPR_DATA_DIR") else None


def smoke_cell(compose_cfg, *overrides: str):
    return compose_cfg("experiment=grid", "grid_task=synthetic", "debug=smoke", *overrides)


@pytest.mark.parametrize("inp,enc", [("wordpiece", "bert"), ("ewe", "tensorcoder"), ("bytes", "leam"),
                                     ("bitcipher_sum", "swem"), ("word2vec", "leam"), ("words", "bert")])
def test_a_grid_cell_is_an_ordinary_train_cell(compose_cfg, tmp_path, inp, enc):
    cfg = smoke_cell(compose_cfg, f"input={inp}", f"encoder={enc}")
    assert cfg.model.net._target_ == "langrepr.models.grid.GridModel"
    record = train(cfg, tmp_path / "run")
    assert record["status"] == "finished"
    assert 0.0 <= record["metrics"]["test/2015A/f1"] <= 1.0
    assert record["params"]["total"] > record["params"]["embedding"] > 0
    vectors = tmp_path / "run" / "input_vectors.npy"
    if inp in ("bitcipher_sum", "word2vec"):   # trained on the cell's training texts, into its folder
        matrix = np.load(vectors)
        assert matrix.shape[1] == 48 and np.isfinite(matrix).all() and matrix.std() > 0
        assert record["metrics"]["input/pretrained_rows"] == len(matrix)       # the input table started from them
    else:
        assert not vectors.exists() and record["metrics"]["input/pretrained_rows"] == 0


def test_vectors_start_the_input_table(tmp_path):
    import functools

    from langrepr.models.grid import GridModel, SWEMEncoder, TokenInput

    matrix = np.random.default_rng(0).normal(size=(10, 8)).astype(np.float32)
    np.save(tmp_path / "v.npy", matrix)
    net = GridModel(functools.partial(TokenInput, width=8, vectors_path=str(tmp_path / "v.npy"), freeze=True),
                    functools.partial(SWEMEncoder), num_labels=3, vocab_size=10)
    assert np.allclose(net.input.table.weight[1:].detach().numpy(), matrix[1:])
    assert not net.input.table.weight.requires_grad


def test_composition_rule():
    ko = {"input": "multihot", "input_languages": ["ko"], "encoder": "swem", "encoder_tags": False}
    assert "exists only for ko text" in grid.composition_error({**ko, "task": "ag_news"})
    assert grid.composition_error({**ko, "task": "nsmc"}) is None
    tagging = {"input": "words", "input_languages": None, "task": "conll2003",
               "task_target": "langrepr.tasks.token_classification.TaggingTask"}
    assert "cannot" not in (grid.composition_error({**tagging, "encoder": "bert", "encoder_tags": True}) or "")
    assert "document encoder" in grid.composition_error({**tagging, "encoder": "leam", "encoder_tags": False})


def test_multihot_on_english_does_not_compose_in_one_line(capfd, tmp_path):
    line = fails_with(capfd, ["experiment=grid", "grid_task=ag_news", "input=multihot", "encoder=swem",
                              f"paths.output_root={tmp_path}", "hydra.mode=RUN"])
    assert line.startswith("does not compose: input multihot exists only for ko text and task ag_news is en"), line


def test_a_temporary_input_config_composes_its_grid_cells(compose_cfg, tmp_path):
    """A new input is one config file: it composes with every encoder and trains, and the renderer sees it."""
    path = CONF_DIR / "input" / f"tmp_unigram_{os.getpid()}.yaml"
    path.write_text(yaml.safe_dump({
        "name": path.stem, "languages": None,
        "net": {"_target_": "langrepr.models.grid.TokenInput", "_partial_": True,
                "vocab_size": "${input.tokenizer.vocab_size}", "width": 32},
        "tokenizer": {"_target_": "langrepr.data.tokenizers.SubwordTokenizer", "algorithm": "unigram",
                      "vocab_size": 500, "max_length": 32},
        "vectors": None}))
    try:
        encoders = sorted(set(grid.group_options("encoder")) - {"none"})
        assert path.stem in grid.group_options("input")
        for enc in encoders:
            cfg = smoke_cell(compose_cfg, f"input={path.stem}", f"encoder={enc}")
            assert cfg.model.tokenizer.inner.algorithm == "unigram"
            assert grid.cell_composes(path.stem, enc, {"datamodule": None, "target": cfg.dataset.task._target_}) is None
        record = train(smoke_cell(compose_cfg, f"input={path.stem}", "encoder=leam"), tmp_path / "run")
        assert record["status"] == "finished"
    finally:
        path.unlink()


# ---------------------------------------------------------------- the renderer on fixture runs
def fake_run(root: Path, seed: int, acc: float | None, task: str, metric: str, **choices: str) -> None:
    name = ",".join(f"{k}={v}" for k, v in sorted({**choices, "grid_task": task}.items())) + f",seed={seed}"
    cell = root / "quick" / "grid" / name
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text(json.dumps({
        "status": "finished", "seed": seed, "commit": "abc1234", "run_id": "grid",
        "choices": {**choices, "grid_task": task}, "metrics": {metric: acc}, "overrides": []}))


def test_renderer_marks_best_floor_and_does_not_compose(tmp_path):
    acc = "test/test/acc"
    for seed, jitter in ((1, -0.004), (2, 0.0), (3, 0.004)):
        fake_run(tmp_path, seed, 0.85 + jitter, "ag_news", acc, input="wordpiece", encoder="swem")
        fake_run(tmp_path, seed, 0.60 + jitter, "ag_news", acc, input="ewe", encoder="swem")
        fake_run(tmp_path, seed, 0.26 + jitter, "ag_news", acc, input="bytes", encoder="bert")
        fake_run(tmp_path, seed, 0.70 + jitter, "nsmc_text", acc, input="multihot", encoder="swem")
        fake_run(tmp_path, seed, 0.69 + jitter * 5, "nsmc_text", acc, input="words", encoder="swem")
    for task, floor, bow in (("ag_news", 0.25, 0.86), ("nsmc_text", 0.5, 0.72)):
        fake_run(tmp_path, 1, floor, task, acc, model="majority_class")
        fake_run(tmp_path, 1, bow, task, acc, model="bow_lr")
    table = grid.render("quick", tmp_path)
    md = (tmp_path / "tables" / "grid.quick.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "**85.0 ± 0.4**" in rows["word pieces × SWEM"]                     # best beyond the noise: bold
    assert "(below floor)" in rows["raw bytes × BERT"]                          # 26% against a 25% floor + 5
    assert rows["multi-hot groups × SWEM"].count(grid.NOT_COMPOSED) == 3        # English columns
    assert rows["words (random) × LEAM"].count(grid.NOT_COMPOSED) == 1         # a document encoder cannot tag
    assert "**" not in rows["multi-hot groups × SWEM"]                          # 70.0 vs 69.0 ± 2: within noise
    assert table["best"]["NSMC acc"]["beyond_noise"] is False
    # 6 inputs x 4 encoders x 3 classification tasks + multi-hot x 4 on NSMC + 6 inputs x 2 tagging encoders on NER
    assert table["measured"] == 5 and table["composing"] == 3 * 6 * 4 + 4 + 6 * 2
    assert "encoder leam is a document encoder (one vector per text) and task conll2003 tags every token" in md
    assert "input multihot exists only for ko text" in md
    saved = json.loads((tmp_path / "tables" / "grid.quick.json").read_text())
    best = next(r for r in saved["rows"] if r["key"] == "word pieces × SWEM")
    assert best["cells"]["AG News acc"]["best"] is True
    if table["figure"]:
        assert (tmp_path / "figures" / "grid.quick.png").stat().st_size > 1000


# ---------------------------------------------------------------- `make grid` at smoke size
@pytest.mark.slow   # ~2 min of CLI start-up (8 Hydra sweeps); grid cells, tiny NER cells and the renderer run in-process in
# test_grid.py / test_grid_conll.py (make test-all runs this one)
def test_make_grid_runs_its_sweeps_and_renders_at_smoke_size(tmp_path):
    """`make grid PROFILE=quick` itself, narrowed to two inputs x two encoders, one seed, every cell at debug=smoke."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    if DATA is None or not all((DATA / p).exists() for p in ("agnews/test.csv", "nsmc", "conll2003/eng.train")):
        pytest.skip("LANGREPR_DATA_DIR lacks agnews/, nsmc/ or conll2003/ (the quick grid's AG News, NSMC and NER "
                    "columns)")
    out = tmp_path / "outputs"
    args = f"debug=smoke paths.output_root={out} paths.cache_dir={tmp_path / 'cache'}"
    run = subprocess.run(["make", "grid", "PROFILE=quick", f"PY={sys.executable}", "STAMP=",
                          "GRID_INPUTS=words,bitcipher_sum", "GRID_ENCODERS=swem bert", "GRID_SEEDS=1",
                          f"GRID_OUTPUTS={out}", f"ARGS={args}"], cwd=ROOT, capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    table = json.loads((out / "tables" / "grid.quick.json").read_text())
    assert table["measured"] == 2 * 2 * 3 + 2 + 2   # 2 inputs x 2 encoders x 3 tasks + multi-hot x 2 + NER x BERT
    references = [r for r in table["rows"] if r["reference"]]
    assert all(c["ours"] is not None for r in references for c in r["cells"].values())
    assert "grid.quick.png" in (table["figure"] or "grid.quick.png")


# ---------------------------------------------------------------- the cost plan and the report
def test_the_plan_costs_a_grid_cell_and_skips_one_that_does_not_compose():
    from langrepr import plan

    cfg, _ = plan.compose_cell(["experiment=grid", "profile=quick", "grid_task=nsmc_text", "input=ewe",
                                "encoder=tensorcoder"])
    stage = plan.train_stage(cfg)
    # a byte-level input takes its own quick budget (conf/papers/ewe/input/ewe.yaml: 1,000 steps), the others the grid's 200
    assert stage.work.kind == "grid_classifier" and stage.work.shape["ids"] == [64, 16] and stage.steps == 1000
    words, _ = plan.compose_cell(["experiment=grid", "profile=quick", "grid_task=nsmc_text", "input=words",
                                  "encoder=tensorcoder"])
    assert plan.train_stage(words).steps == 200
    measured = plan.measure(stage.work)
    assert measured["params"] > 0 and measured["step_flops"] > measured["fwd_flops"] > 0
    english, _ = plan.compose_cell(["experiment=grid", "profile=quick", "grid_task=ag_news", "input=multihot",
                                    "encoder=swem"])
    assert "exists only for ko text" in plan.grid_composition(english)
    assert plan.grid_composition(cfg) is None
    vectors, _ = plan.compose_cell(["experiment=grid", "profile=quick", "grid_task=ag_news", "input=word2vec",
                                    "encoder=leam"])
    assert plan.measure(plan.train_stage(vectors).work)["params"] > 0     # no vectors file needed to cost it
    korean, _ = plan.compose_cell(["experiment=grid", "profile=quick", "grid_task=nsmc_text", "input=multihot",
                                   "encoder=bert"])
    assert plan.measure(plan.train_stage(korean).work)["step_flops"] > 0  # POS ids within the tag table
    sweeps = plan.extra_sweeps("grid", "full")     # what `make grid` runs beside the experiment's own sweep
    assert ["grid_task=nsmc_text", "input=multihot"] in sweeps and ["grid_task=conll2003", "encoder=bert"] in sweeps
    assert len(sweeps) == 11 and plan.extra_sweeps("ewe_table3", "full") == []


def test_the_report_shows_the_heat_map(tmp_path):
    from langrepr import report

    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "grid.quick.png").write_bytes(b"\x89PNG")
    page = report.build_markdown(tmp_path, tmp_path / "img", tmp_path)
    assert "## The grid: gap to each column's floor" in page and "figures/grid.quick.png" in page
    assert "## Paper figures" not in page


def test_make_tables_never_blanks_the_committed_grid(tmp_path, capsys):
    """`make tables` in a clone (no run folders) renders the grid beside the committed one, never over it."""
    from langrepr.tables import main as tables_main
    committed = ROOT / "outputs" / "tables" / "grid.quick.json"
    if not committed.is_file():
        pytest.skip("no committed quick grid")
    (tmp_path / "tables").mkdir()
    shutil.copy(committed, tmp_path / "tables" / "grid.quick.json")
    grid.main(["--profile", "quick", "--outputs", str(tmp_path)])
    assert json.loads((tmp_path / "tables" / "grid.quick.json").read_text()) == json.loads(committed.read_text())
    assert json.loads((tmp_path / "tables" / "grid.quick.partial.json").read_text())["measured"] == 0
    with pytest.raises(SystemExit):                     # `tables grid`: one line naming the grid's renderer
        tables_main(["grid", "--profile", "quick", "--outputs", str(tmp_path)])
    assert "python -m langrepr.grid" in capsys.readouterr().err


def test_a_mistyped_grid_choice_is_one_line_listing_the_options():
    from langrepr.errors import UserError
    from langrepr.train import check_group_choices
    with pytest.raises(UserError, match="unknown encoder 'bertt': did you mean bert\?\n  all encoder options: bert, leam, none, swem, tensorcoder"):
        check_group_choices(["encoder=bertt"])


@pytest.mark.parametrize("code,partial_bytes", [(28, True), (30, False)])   # ENOSPC mid-write; EROFS at the open
def test_an_unwritable_figures_folder_is_one_line_and_leaves_no_temp_file(tmp_path, capfd, monkeypatch, code,
                                                                          partial_bytes, fresh_root_logger):
    """A full disk or a read-only folder under the heat map: one line, exit 2, no `*.tmp*` left, nothing replaced."""
    import errno

    import matplotlib.figure

    assert code in (errno.ENOSPC, errno.EROFS)
    committed = ROOT / "outputs" / "tables" / "grid.quick.json"
    (tmp_path / "tables").mkdir()
    shutil.copy(committed, tmp_path / "tables" / "grid.quick.json")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "grid.quick.png").write_bytes(b"\x89PNG committed")

    def savefig(self, fname, *args, **kwargs):
        if partial_bytes:
            Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(code, os.strerror(code), str(fname))
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    with pytest.raises(SystemExit) as exit_:   # --force: replace the committed grid (tmp_path holds no run folders)
        grid.main(["--profile", "quick", "--outputs", str(tmp_path), "--force"])
    err = capfd.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("error: cannot write") and os.strerror(code) in err
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["grid.quick.png"]
    assert (tmp_path / "figures" / "grid.quick.png").read_bytes() == b"\x89PNG committed"
    assert (tmp_path / "tables" / "grid.quick.json").read_bytes() == committed.read_bytes()
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == ["grid.quick.json"]


def test_partial_and_temporary_renders_are_git_ignored():
    """`make tables` in a clone writes the grid's heat map beside the committed one: never a file to commit."""
    names = ["outputs/figures/grid.quick.partial.png", "outputs/tables/grid.quick.partial.json",
             "outputs/figures/.grid.quick.png.abc123.tmp", "outputs/figures/grid.quick.tmp.png"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True)
    assert sorted(ignored.stdout.split()) == sorted(names)
    kept = subprocess.run(["git", "check-ignore", "--no-index", "outputs/figures/grid.quick.png"], cwd=ROOT,
                          capture_output=True, text=True)
    assert kept.returncode == 1   # the committed heat map stays tracked


def test_a_grid_no_cell_has_run_is_written_as_partial_not_as_a_table(tmp_path):
    """`make tables` (full profile) on a clone: no grid run, no committed full grid -> `.partial`, never grid.md."""
    grid.main(["--profile", "full", "--outputs", str(tmp_path)])
    assert not (tmp_path / "tables" / "grid.md").exists() and not (tmp_path / "tables" / "grid.json").exists()
    assert json.loads((tmp_path / "tables" / "grid.partial.json").read_text())["measured"] == 0
    assert not (tmp_path / "figures" / "grid.png").exists()


def test_a_grid_cell_given_model_names_what_was_written_and_encoder_instead(capfd, tmp_path):
    """Issue 33: `model=bert_ewe` on a grid cell said 'unknown key model.net.arch', a key nobody wrote."""
    line = fails_with(capfd, ["experiment=grid", "profile=quick", "grid_task=ag_news", "input=words", "encoder=swem",
                              "model=bert_ewe", f"paths.output_root={tmp_path}", "hydra.mode=RUN"])
    assert line.startswith("model=bert_ewe: a grid cell (input=words encoder=swem) builds its network from input= "
                           "and encoder=, not model=: drop model=bert_ewe and pick the encoder with encoder=<"), line
    assert "model.net" not in line and not (tmp_path / "quick").exists()
