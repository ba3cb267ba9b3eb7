"""Scale-out on existing engines: DDP keeps the paper's batch and reduces metrics; submitit runs cells as jobs."""

from __future__ import annotations

import json

import pytest
from hydra.utils import instantiate

from langrepr.errors import UserError
from langrepr.scale_out import fit_batch_to_devices, is_writer, launched_ranks, per_device_batch, world_size
from langrepr.train import task_kwargs, train


@pytest.mark.parametrize("effective, world, cap, expected", [
    (32, 1, None, (32, 1)), (32, 4, None, (8, 1)), (32, 4, 4, (4, 2)), (32, 8, 1, (1, 4)), (48, 2, 16, (12, 2)),
])
def test_per_device_batch_times_processes_times_accumulation_is_the_paper_batch(effective, world, cap, expected):
    per_device, accumulation = per_device_batch(effective, world, cap)
    assert (per_device, accumulation) == expected and per_device * world * accumulation == effective


def test_batch_that_cannot_be_split_is_one_clear_error():
    with pytest.raises(UserError, match="no whole per-device batch gives the effective batch 30 on 4 processes"):
        per_device_batch(30, 4)
    with pytest.raises(UserError, match="smaller than the 8 processes"):
        per_device_batch(4, 8)
    assert world_size(2, 3) == 6 and world_size([0, 1, 2], 1) == 3 and world_size("0,1", 2) == 4


def evaluate_single_process(cfg, ckpt, limit_batches=1.0):
    """The same test splits scored by one process from the checkpoint, built as train.py builds the cell."""
    import pytorch_lightning as pl

    tokenizer = instantiate(cfg.model.tokenizer) if cfg.model.get("tokenizer") else None
    dm = instantiate(cfg.dataset.datamodule, **({"tokenizer": tokenizer} if tokenizer is not None else {}))
    dm.prepare_data()
    dm.setup("fit")
    net = instantiate(cfg.model.net, **dm.net_kwargs)
    task = instantiate(cfg.dataset.task, net=net, optimizer=instantiate(cfg.optimizer), scheduler=None,
                       **task_kwargs(dm))
    task.test_split_names = list(getattr(dm, "test_splits", ["test"]))
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_test_batches=limit_batches)
    results = {}
    for result in trainer.test(task, datamodule=dm, ckpt_path=str(ckpt), verbose=False):
        results.update({k: float(v) for k, v in result.items()})
    return results


def test_ddp_two_cpu_processes_keep_the_batch_and_reduce_metrics(compose_cfg, tmp_path):
    # gloo on CPU; fork instead of the config's spawn only to skip re-importing torch in each worker
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "trainer=ddp", "trainer.accelerator=cpu",
                      "trainer.devices=2", "trainer.strategy=ddp_fork", "test_ckpt=last",
                      "trainer.limit_test_batches=1.0")                             # all 16 test docs, 8 per rank
    record = train(cfg, tmp_path / "run")
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["status"] == "finished" and written == json.loads(json.dumps(record))   # one writer: the cell
    assert written["scale_out"] == {"effective_batch": 4, "world_size": 2, "per_device_batch": 2,
                                    "accumulate_grad_batches": 1, "strategy": "ddp_fork"}
    assert written["steps"] == 2 and written["epochs"] == 1      # 2 batches of 2 per rank, counted by the workers
    header = (tmp_path / "run" / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "train/loss" in header and "test/2015A/f1" in header   # fit and test columns in one CSV log
    single = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke")
    whole = evaluate_single_process(single, tmp_path / "run" / "checkpoints" / "last.ckpt")
    half = evaluate_single_process(single, tmp_path / "run" / "checkpoints" / "last.ckpt", limit_batches=2)
    keys = [f"test/{s}/{m}" for s in ("2015A", "2015B") for m in ("f1", "precision", "recall")]
    # torchmetrics states are summed over both ranks: the DDP numbers are those of the whole split ...
    for key in keys:
        assert written["metrics"][key] == pytest.approx(whole[key], abs=1e-6), key
    # ... and the whole split is not what half of it gives, so equality above is not a coincidence
    assert any(abs(half[k] - whole[k]) > 1e-4 for k in keys)


# Table 1 cells (build and count, no data) at toy width: what the test costs is the jobs' Python start-up
TINY_COUNT_CELLS = ("experiment=ewe_table1", "model=bert_ewe,bert_orig", "model.net.num_layers=1",
                    "model.net.hidden_size=48", "model.net.intermediate_size=48", "model.net.num_heads=16")


@pytest.mark.slow  # ~40 s: spawned submitit workers re-import torch and Lightning (make test-all runs it)
def test_submitit_local_runs_each_cell_as_an_independent_resumable_job(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[cluster]'")
    from conftest import run_cli

    out = tmp_path / "outputs"
    args = ("langrepr.train", "-m", "hydra/launcher=submitit_local", *TINY_COUNT_CELLS, f"paths.output_root={out}")
    first = run_cli(*args, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    sweep = out / "exact" / "ewe_table1"
    jobs = sorted(p.name for p in (sweep / ".submitit").iterdir() if p.name.isdigit())   # folders named by job id
    assert len(jobs) == 2                                           # one job (one process) per cell ...
    assert all(any((sweep / ".submitit" / j).glob("*_result.pkl")) for j in jobs)   # ... each with its own result
    cells = {p.parent.name: p for p in sweep.glob("*/metrics.json")}
    assert len(cells) == 2 and all(json.loads(p.read_text())["status"] == "finished" for p in cells.values())
    ewe = next(name for name in cells if "model=bert_ewe" in name)
    orig = next(name for name in cells if "model=bert_orig" in name)
    assert json.loads(cells[ewe].read_text())["params"]["total"] < json.loads(cells[orig].read_text())["params"]["total"]
    kept = cells[orig].read_text()
    cells[ewe].unlink()                                             # that cell's result is lost; the other stands
    second = run_cli(*args, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    new_jobs = [j for j in (sweep / ".submitit").iterdir() if j.name.isdigit() and j.name not in jobs]
    logs = {j.name: "".join(p.read_text() for p in j.glob("*_log.*")) for j in new_jobs}
    assert len(new_jobs) == 2 and sum("already finished" in text for text in logs.values()) == 1
    assert cells[orig].read_text() == kept                          # skipped, not rerun
    assert json.loads(cells[ewe].read_text())["status"] == "finished"   # rerun on its own


# ---------------------------------------------------------------- DDP processes started by SLURM


def fake_slurm(monkeypatch, rank: int, tasks: int = 4, nodes: int = 2, job_name: str = "langrepr") -> None:
    """The variables srun sets in task `rank` of a job with `tasks` tasks over `nodes` nodes."""
    for key in ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK"):
        monkeypatch.delenv(key, raising=False)
    per_node = tasks // nodes
    monkeypatch.setenv("SLURM_JOB_NAME", job_name)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_NODELIST", "gpu[01-02]")
    monkeypatch.setenv("SLURM_NTASKS", str(tasks))
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", str(per_node))
    monkeypatch.setenv("SLURM_PROCID", str(rank))
    monkeypatch.setenv("SLURM_LOCALID", str(rank % per_node))
    monkeypatch.setenv("SLURM_NODEID", str(rank // per_node))


def test_under_slurm_every_task_derives_the_same_batch_over_slurms_tasks(compose_cfg, monkeypatch):
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "trainer=ddp", "trainer.devices=2", "trainer.num_nodes=2",
                      "dataset.datamodule.batch_size=32", "trainer.effective_batch.max_per_device=4")
    for rank in range(4):
        fake_slurm(monkeypatch, rank)
        assert launched_ranks() == {"launcher": "SLURM", "world_size": 4, "global_rank": rank,
                                    "local_rank": rank % 2, "node_rank": rank // 2}
        assert is_writer() == (rank == 0)
        fitted, record = fit_batch_to_devices(cfg)
        assert record == {"effective_batch": 32, "world_size": 4, "per_device_batch": 4, "accumulate_grad_batches": 2,
                          "strategy": "ddp", "launcher": "SLURM"}   # SLURM started the processes: no spawning
        assert fitted.dataset.datamodule.batch_size == 4 and fitted.trainer.accumulate_grad_batches == 2
    fake_slurm(monkeypatch, 0, tasks=2, nodes=1)                   # one task per node, where the config wants 2 x 2
    with pytest.raises(UserError, match=r"SLURM started 2 process\(es\) but trainer.devices × trainer.num_nodes = 4"):
        fit_batch_to_devices(cfg)
    fake_slurm(monkeypatch, 1, job_name="interactive")             # Lightning's "not launched by SLURM" names
    assert launched_ranks() is None and is_writer()
    monkeypatch.delenv("SLURM_NTASKS")
    assert launched_ranks() is None and fit_batch_to_devices(cfg)[1]["strategy"] == "ddp_spawn"


def test_under_slurm_only_global_rank_0_writes_the_cells_files(compose_cfg, monkeypatch, tmp_path):
    cfg = compose_cfg("experiment=ewe_table1", "model=bert_orig", "model.net.num_layers=1", "model.net.hidden_size=48",
                      "model.net.intermediate_size=48")
    for rank in (1, 2, 3):                                           # workers: they run the cell, write nothing
        fake_slurm(monkeypatch, rank)
        record = train(cfg, tmp_path / "run")
        assert record["status"] == "finished" and record["params"]["total"] > 0
        assert not (tmp_path / "run" / "metrics.json").exists()
        assert not (tmp_path / "run" / "config_resolved.yaml").exists()
    fake_slurm(monkeypatch, 0)
    record = train(cfg, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == json.loads(json.dumps(record))
    assert (tmp_path / "run" / "config_resolved.yaml").exists()


def test_under_slurm_a_worker_rank_leaves_the_csv_log_to_rank_0(monkeypatch, tmp_path):
    from pytorch_lightning.loggers import CSVLogger
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

    from langrepr.scale_out import SpawnedDDPTrainer

    trainer = SpawnedDDPTrainer(accelerator="cpu", devices=1, logger=CSVLogger(tmp_path), enable_progress_bar=False,
                                enable_checkpointing=False, enable_model_summary=False)
    monkeypatch.setattr(rank_zero_only, "rank", 1)                 # what Lightning sets in a rank-1 process ...
    monkeypatch.setattr(SpawnedDDPTrainer, "is_global_zero", property(lambda self: False))
    trainer.restore_csv_columns()                                   # ... whose CSV logger has no file: nothing to do
    assert not any(tmp_path.rglob("metrics.csv"))


@pytest.mark.slow  # spawned workers re-import torch and Lightning: about a minute on 2 busy cores
def test_ddp_spawn_as_configured_pickles_the_cell_and_keeps_its_records(compose_cfg, tmp_path):
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "trainer=ddp", "trainer.accelerator=cpu",
                      "trainer.devices=2")
    record = train(cfg, tmp_path / "run")
    assert record["status"] == "finished" and record["scale_out"]["strategy"] == "ddp_spawn"
    assert record["steps"] == 2 and 0.0 <= record["metrics"]["test/2015A/f1"] <= 1.0
    header = (tmp_path / "run" / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "train/loss" in header and "test/2015A/f1" in header
