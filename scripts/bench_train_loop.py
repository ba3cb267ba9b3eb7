"""Benchmark: the Lightning + Hydra training loop against a bare PyTorch loop (target >= 0.95x its steps/s).

Same cell, same model object, same data loader, same batch, same loss, optimizer and schedule: the EWE Table 3
quick BERT_EWE cell on synthetic patents, composed by Hydra and built as `langrepr.train` builds it. The
Lightning side is the cell's own Trainer (its trainer config, callbacks — checkpointing, the non-finite guard,
the progress bar — and CSV logger); the bare side is `for batch in loader: forward, loss, backward, step`.
Steady-state steps/s is timed from batch start to batch start after a few warm-up steps (data loading,
callbacks and logging included), in interleaved rounds; the ratio is Lightning / bare per round, reported as
median and spread. The one-time start-up of `Trainer.fit` (until its first batch) is reported beside it.
Writes outputs/bench/train_loop_overhead.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate

from langrepr.benchmarking import (
    build_cell,
    compose_cell,
    describe,
    interleaved_rounds,
    lightning_fit,
    machine_load,
    spread,
    steps_per_s,
    write_bench,
)
from langrepr.tasks.optim import configure
from langrepr.utils import PROJECT_ROOT

CELL = ["experiment=ewe_table3", "profile=quick", "dataset=synthetic", "model=bert_ewe"]


def bare_round(cfg, dm, net, task, steps: int, warmup: int) -> dict:
    begin = time.perf_counter()
    net.train()
    wiring = configure(net, instantiate(cfg.optimizer), instantiate(cfg.scheduler), steps + warmup)
    optimizer, scheduler = wiring["optimizer"], wiring["lr_scheduler"]["scheduler"]
    batches = itertools.chain.from_iterable(dm.train_dataloader() for _ in itertools.count())
    starts, last_end = [], 0.0
    for batch in itertools.islice(batches, steps + warmup):
        starts.append(time.perf_counter())
        logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        loss = task.loss(logits, batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        last_end = time.perf_counter()
    return {"steps_per_s": steps_per_s(starts, last_end, warmup), "startup_s": starts[0] - begin}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round and loop")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set, not inherited)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_cell([*CELL, f"paths.cache_dir={tmp}/cache", f"paths.output_dir={tmp}/run"])
        pl.seed_everything(1, verbose=False)
        dm, net, task = build_cell(cfg)
        runs = interleaved_rounds({
            "lightning": lambda: lightning_fit(cfg, dm, task, args.steps, args.warmup, Path(tmp) / "run"),
            "bare": lambda: bare_round(cfg, dm, net, task, args.steps, args.warmup),
        }, args.rounds)
    ratio = spread([lt["steps_per_s"] / b["steps_per_s"] for lt, b in zip(runs["lightning"], runs["bare"])])
    details = {
        "cell": " ".join(CELL), "batch_size": int(cfg.dataset.datamodule.batch_size),
        "num_workers": int(cfg.dataset.datamodule.num_workers), "steps_per_round": args.steps,
        "warmup_steps": args.warmup, "rounds": args.rounds, "threads": torch.get_num_threads(),
        "steps_per_s": {k: spread([r["steps_per_s"] for r in v]) for k, v in runs.items()},
        "startup_s": {k: statistics.median(r["startup_s"] for r in v) for k, v in runs.items()},
        "ratio_spread": ratio, "load": machine_load(), "torch": torch.__version__, "lightning": pl.__version__,
    }
    result = {"name": "train_loop_overhead", "ratio": ratio["median"],
              "target": ">= 0.95 (Lightning + Hydra steps/s over the bare loop's)", "details": details}
    out = PROJECT_ROOT / "outputs" / "bench" / "train_loop_overhead.json"
    write_bench(out, result)
    sps = details["steps_per_s"]
    verdict = "meets" if ratio["median"] >= 0.95 else "misses"
    print(f"train_loop_overhead ({args.threads} thread(s), load {details['load']['loadavg_1_5_15'][0]}): "
          f"Lightning / bare steps/s = {describe(ratio)}; {sps['lightning']['median']:.2f} vs "
          f"{sps['bare']['median']:.2f} steps/s, batch {details['batch_size']}; fit start-up "
          f"{details['startup_s']['lightning']:.2f} s vs {details['startup_s']['bare']:.2f} s (once per cell) — "
          f"{verdict} target >= 0.95; wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
