"""Benchmark: data-loader wait as a fraction of train-step time in each paper's quick table (target < 5%).

One training cell per paper whose quick table trains through a LightningDataModule, composed by Hydra and built
exactly as `make <paper>-table<N> PROFILE=quick` builds it (its data, tokenizer, batch size and loader
workers), then trained for a few steps by its own Trainer with Lightning's SimpleProfiler: the wait is the
time in `next()` on the train loader, the step is the time running the batch. Cells are interleaved over
rounds; each round gives one fraction per cell, reported as median and spread. A cell whose data is not on
this machine is reported as not run, with the reason. Multi-hot LM and Bit Cipher quick tables are pipeline
cells (`stage: pipeline`) with no LightningDataModule; they are listed with that reason.
Writes outputs/bench/loader_wait.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pytorch_lightning as pl
import torch
from hydra.errors import InstantiationException

from langrepr.benchmarking import (
    build_cell,
    compose_cell,
    describe,
    interleaved_rounds,
    lightning_fit,
    machine_load,
    spread,
    write_bench,
)
from langrepr.errors import UserError
from langrepr.utils import PROJECT_ROOT

CELLS = {
    "EWE Table 3 (BERT_EWE, synthetic patents)":
        ["experiment=ewe_table3", "profile=quick", "dataset=synthetic", "model=bert_ewe"],
    "TensorCoder Table 1 (Transformer-1head, PTB)":
        ["experiment=tensorcoder_table1", "profile=quick", "dataset=ptb", "model=transformer_1head"],
    "LEAM Table 2 (LEAM, AG News)":
        ["experiment=leam_table2", "profile=quick", "dataset=ag_news", "model=leam"],
}
NOT_TRAINED_HERE = {
    "Multi-hot LM Tables 1-5": "pipeline cells (stage: pipeline): counts, or MLM/fine-tuning loops built inside "
                               "the pipeline over tensors already in memory; no LightningDataModule to time",
    "Bit Cipher Tables 1, 6": "pipeline cells (stage: pipeline): co-occurrence counting and probes, no train loader",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15, help="timed steps per cell and round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps (worker start-up, allocator)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set, not inherited)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cells, not_run = {}, dict(NOT_TRAINED_HERE)
    with tempfile.TemporaryDirectory() as tmp:
        for label, overrides in CELLS.items():
            cfg = compose_cell([*overrides, f"paths.cache_dir={tmp}/cache", f"paths.output_dir={tmp}/run"])
            try:
                pl.seed_everything(1, verbose=False)
                dm, _, task = build_cell(cfg)
            except Exception as err:   # a missing data set: the loaders' one-line errors, or a file not found
                cause = err.__cause__ if isinstance(err, InstantiationException) else err
                if not isinstance(cause, (UserError, FileNotFoundError)):
                    raise
                not_run[label] = f"data not on this machine ({' '.join(str(cause).split())[:200]})"
                continue
            cells[label] = (cfg, dm, task)

        def fit(label: str):
            cfg, dm, task = cells[label]
            return lambda: lightning_fit(cfg, dm, task, args.steps, args.warmup, Path(tmp) / "run")

        runs = interleaved_rounds({label: fit(label) for label in cells}, args.rounds)
    measured = {}
    for label, rounds in runs.items():
        cfg = cells[label][0]
        measured[label] = {
            "wait_fraction": spread([r["wait_s"] / (r["wait_s"] + r["run_s"]) for r in rounds]),
            "step_ms": spread([1e3 * r["run_s"] / args.steps for r in rounds]),
            "batch_size": int(cfg.dataset.datamodule.batch_size),
            "num_workers": int(cfg.dataset.datamodule.get("num_workers", 0)), "overrides": CELLS[label],
        }
    worst = max((m["wait_fraction"]["median"] for m in measured.values()), default=float("nan"))
    result = {"name": "loader_wait", "ratio": worst, "target": "< 0.05 of step time (worst quick table, median)",
              "details": {"cells": measured, "not_run": not_run, "rounds": args.rounds, "steps": args.steps,
                          "warmup_steps": args.warmup, "threads": torch.get_num_threads(), "load": machine_load()}}
    out = PROJECT_ROOT / "outputs" / "bench" / "loader_wait.json"
    write_bench(out, result)
    for label, m in measured.items():
        verdict = "meets" if m["wait_fraction"]["median"] < 0.05 else "misses"
        print(f"loader_wait {label}: {describe(m['wait_fraction'], '{:.2%}')} of step time "
              f"(step {m['step_ms']['median']:.0f} ms, batch {m['batch_size']}, {m['num_workers']} workers) — "
              f"{verdict} target < 5%")
    for label, reason in not_run.items():
        print(f"loader_wait {label}: not run — {reason}")
    print(f"loader_wait: {args.threads} thread(s), load {result['details']['load']['loadavg_1_5_15'][0]}; "
          f"wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
