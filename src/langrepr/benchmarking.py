"""Shared by the benchmark and GPU-check scripts: real model configs, batches, and how a ratio is measured.

Every `make bench` ratio follows one discipline: interleaved rounds, median and spread, optionally a competing
process, the thread count set deliberately and the machine load recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate

from langrepr.build import build_cell, compose  # noqa: F401  (build_cell: for the scripts)
from langrepr.build import build_net as build_node
from langrepr.utils import PROJECT_ROOT, write_json_atomic


def build_net(model: str, overrides: list[str], num_labels: int = 1328) -> tuple[torch.nn.Module, dict]:
    """The net of `model=<model>` (with overrides) and its input shape {u, v, vocab}."""
    cfg = compose([f"model={model}", *overrides])
    net = build_node(cfg.model.net, num_labels=num_labels)
    tok = cfg.model.tokenizer
    return net, {"u": tok.get("u", tok.get("max_length")), "v": tok.get("v", 1),
                 "vocab": tok.get("vocab_size", 0x10FFFF if "Codepoint" in tok._target_ else 256),
                 "bytes": "Byte" in tok._target_, "heads": cfg.model.net.num_heads}


def random_batch(shape: dict, batch: int, num_labels: int, generator: torch.Generator) -> dict:
    """Inputs like a tokenizer's: word-like byte materials for EWE, ids in range for ORIG; sparse labels."""
    u = shape["u"]
    if shape["bytes"]:
        ids = torch.randint(97, 123, (batch, u, shape["v"]), generator=generator)
        lengths = torch.randint(3, 11, (batch, u, 1), generator=generator)
        ids = ids.masked_fill(torch.arange(shape["v"]) >= lengths, 0)
    else:
        ids = torch.randint(5, min(shape["vocab"], 30000), (batch, u), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, u, dtype=torch.long),
            "labels": (torch.rand(batch, num_labels, generator=generator) < 0.003).float()}


# ---------------------------------------------------------------- measuring under load

def spread(values: list[float]) -> dict:
    """Median and spread of repeated measurements: quartiles, range, n (a ratio without them is one draw)."""
    ordered = sorted(values)
    q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else ordered * 3
    return {"median": statistics.median(ordered), "q1": q1, "q3": q3, "min": ordered[0], "max": ordered[-1],
            "n": len(ordered)}


def describe(summary: dict, fmt: str = "{:.3f}") -> str:
    """`median [q1, q3] (min-max, n rounds)` in one string."""
    f = fmt.format
    return (f"{f(summary['median'])} [IQR {f(summary['q1'])}-{f(summary['q3'])}, range {f(summary['min'])}-"
            f"{f(summary['max'])}, {summary['n']} rounds]")


def interleaved_rounds(candidates: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Run every candidate once per round, in A B ... then ... B A order on alternate rounds.

    Background load drifts on a shared machine; alternating the order puts each candidate first and last
    equally often, so a slow stretch lands on all of them, and per-round ratios cancel what a round shares.
    """
    results: dict[str, list[Any]] = {name: [] for name in candidates}
    names = list(candidates)
    for index in range(rounds):
        for name in (names if index % 2 == 0 else names[::-1]):
            results[name].append(candidates[name]())
    return results


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (platform.processor() is often empty on Linux)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict:
    """What a number was measured on: CPU, usable cores, GPU and torch's intra-op threads.

    A ratio from a 2-core shared box and one from a GPU node read differently, so every result carries these
    (`write_bench`); the report shows them beside each row.
    """
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu_model(), "cores": machine_load()["cpus"], "gpu": gpu, "threads": torch.get_num_threads(),
            "torch": torch.__version__}


def stamped(payload: Any) -> Any:
    """One result or a list of them, each given the `machine` it was measured on (unless it has one)."""
    here = machine()
    for result in payload if isinstance(payload, list) else [payload]:
        if isinstance(result, dict):
            result.setdefault("machine", here)
    return payload


def write_bench(out: Path, payload: dict | list) -> None:
    """A benchmark's result file, written atomically, each result carrying its hardware and threads."""
    write_json_atomic(out, stamped(payload))


def machine_load() -> dict:
    """What else the machine was doing: load averages and usable cores (a ratio is read against these)."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1_5_15": [round(one, 2), round(five, 2), round(fifteen, 2)],
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}


COMPETITOR = """
import sys, torch
torch.set_num_threads(int(sys.argv[1]))
a, big = torch.randn(384, 384), torch.randn(4_000_000)   # GEMMs and a 16 MB stream: cores and memory bandwidth
while True:
    for _ in range(8):
        a = torch.tanh(a @ a)
    big.mul_(0.999).add_(1e-3)
"""


@contextlib.contextmanager
def competing_process(threads: int = 1) -> Iterator[subprocess.Popen]:
    """A second, training-like process that competes for the cores (and memory bandwidth) while the block runs."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    proc = subprocess.Popen([sys.executable, "-c", COMPETITOR, str(threads)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2.0)                        # let it import torch and start burning before we measure
        if proc.poll() is not None:
            raise RuntimeError(f"the competing process exited early with code {proc.returncode}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- a real table cell, built as train.py builds it
# (langrepr.build.build_cell, imported above, builds its datamodule, net and task)

def compose_cell(overrides: list[str]) -> Any:
    """The composed config of one cell (`experiment=… profile=… model=…`), as `python -m langrepr.train` sees it."""
    return compose(overrides)


class StepClock(pl.Callback):
    """Batch-start times inside `fit`: the loop's fetch, callbacks and logging fall between two of them."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.last_end = 0.0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self.starts.append(time.perf_counter())

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.last_end = time.perf_counter()


def steps_per_s(starts: list[float], last_end: float, warmup: int) -> float:
    """Steady-state rate: steps after the warm-up ones, from the first timed batch start to the last batch end."""
    timed = starts[warmup:]
    return len(timed) / (last_end - timed[0])


LOADER_WAIT = "[_TrainingEpochLoop].train_dataloader_next"   # Lightning's profiler keys
BATCH_RUN = "run_training_batch"


def lightning_fit(cfg: Any, dm: Any, task: Any, steps: int, warmup: int, workdir: Any) -> dict:
    """`steps + warmup` training steps of the cell with its own Trainer config, callbacks and loggers.

    Returns steady-state steps/s, the start-up until the first batch, and from Lightning's SimpleProfiler the
    time spent waiting for each batch (`next()` on the loader) and running it (forward, backward, step, hooks).
    """
    from pytorch_lightning.profilers import SimpleProfiler

    from langrepr.callbacks import AtomicCheckpointIO
    from langrepr.train import resolve_precision

    clock, profiler = StepClock(), SimpleProfiler(dirpath=str(workdir), filename="profile")   # report to a file
    callbacks = [instantiate(c) for c in cfg.get("callbacks", {}).values() if c is not None] + [clock]
    loggers = [instantiate(c) for c in cfg.get("logger", {}).values() if c is not None]
    begin = time.perf_counter()
    trainer = instantiate(resolve_precision(cfg.trainer), logger=loggers or False, callbacks=callbacks,
                          default_root_dir=str(workdir), plugins=[AtomicCheckpointIO()], profiler=profiler,
                          max_steps=steps + warmup, max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0,
                          val_check_interval=None, check_val_every_n_epoch=1)
    trainer.fit(task, datamodule=dm)
    waits, runs = profiler.recorded_durations[LOADER_WAIT], profiler.recorded_durations[BATCH_RUN]
    # the last `next()` may be the one that found the epoch's end; pair each wait with the batch it fetched
    waits, runs = waits[warmup:len(runs)], runs[warmup:]
    return {"steps_per_s": steps_per_s(clock.starts, clock.last_end, warmup), "startup_s": clock.starts[0] - begin,
            "warmup_s": clock.starts[warmup] - clock.starts[0],   # first steps: where one-time compilation lands
            "wait_s": float(sum(waits)), "run_s": float(sum(runs))}


# ---------------------------------------------------------------- one quick cell per paper, in two variants

# one quick training cell per paper, and the data folder each needs under LANGREPR_DATA_DIR (None: generated)
QUICK_CELLS = {
    "ewe": (["experiment=ewe_table3", "profile=quick", "dataset=synthetic", "model=bert_ewe"], None),
    "tensorcoder": (["experiment=tensorcoder_table3", "profile=quick", "dataset=multi30k",
                     "model=tensorcoder_1conv_nmt"], "multi30k"),
    "leam": (["experiment=leam_table2", "profile=quick", "dataset=ag_news", "model=leam"], "agnews"),
    "multihot": (["experiment=grid", "profile=quick", "grid_task=nsmc_text", "input=multihot", "encoder=bert"], "nsmc"),
    "bitcipher": (["experiment=bitcipher_figure4", "profile=quick", "dataset=ptb_causal", "lm_init=cold"], "ptb"),
}


def missing_data(paper: str) -> str | None:
    """Why a paper's quick cell cannot run here (its data folder is absent), or None."""
    needs = QUICK_CELLS[paper][1]
    data_dir = os.environ.get("LANGREPR_DATA_DIR")
    if needs and not (data_dir and Path(data_dir, needs).exists()):
        return f"needs {needs}/ under LANGREPR_DATA_DIR"
    return None


def compare_cell_variants(overrides: list[str], variants: dict[str, tuple[list[str], Callable | None]],
                          steps: int, warmup: int, rounds: int) -> dict[str, list[dict]]:
    """Fit one cell in each variant (its extra overrides, then a change to the built net) in interleaved rounds.

    Every variant is built from seed 1, so the variants differ only in what they name; each round's result has
    steady-state steps/s, start-up and warm-up times, and the training loss after its steps (a speed-up that
    changes the numbers shows there).
    """
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for name, (extra, change_net) in variants.items():
            cfg = compose_cell([*overrides, *extra, f"paths.cache_dir={tmp}/cache", f"paths.output_dir={tmp}/run"])
            pl.seed_everything(1, verbose=False)
            dm, net, task = build_cell(cfg)
            if change_net is not None:
                change_net(net)
            built[name] = (cfg, dm, task)

        def fit(name: str) -> dict:
            cfg, dm, task = built[name]
            result = lightning_fit(cfg, dm, task, steps, warmup, Path(tmp) / name)
            loss = task.trainer.callback_metrics.get("train/loss") if task.trainer is not None else None
            return {**result, "loss": None if loss is None else float(loss)}

        return interleaved_rounds({name: (lambda n=name: fit(n)) for name in built}, rounds)


def variant_ratio(runs: dict[str, list[dict]], faster: str, baseline: str) -> dict:
    """Per-round steps/s of `faster` over `baseline`, as a spread, and the details every such ratio reports."""
    ratio = spread([a["steps_per_s"] / b["steps_per_s"] for a, b in zip(runs[faster], runs[baseline])])
    return {"ratio_spread": ratio,
            "steps_per_s": {k: spread([r["steps_per_s"] for r in v]) for k, v in runs.items()},
            "first_startup_s": {k: v[0]["startup_s"] for k, v in runs.items()},
            "first_warmup_s": {k: v[0]["warmup_s"] for k, v in runs.items()},   # one-time compilation lands here
            "train_loss_per_round": {k: [r["loss"] for r in v] for k, v in runs.items()},
            "threads": torch.get_num_threads(), "load": machine_load(), "torch": torch.__version__}


def write_results(out: Path, results: list[dict]) -> None:
    """Merge into `out`: a run of some papers keeps the others' earlier measurements."""
    names = {r["name"] for r in results}
    kept = [r for r in (json.loads(out.read_text()) if out.exists() else []) if r["name"] not in names]
    write_json_atomic(out, kept + stamped(results))   # kept results keep the machine they ran on
    print(f"wrote {out.relative_to(PROJECT_ROOT) if out.is_relative_to(PROJECT_ROOT) else out}")


def quick_cell_args(description: str) -> Any:
    """The arguments every quick-cell variant benchmark takes (papers, rounds, steps, warm-up, threads), applied."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--papers", nargs="*", default=list(QUICK_CELLS), choices=list(QUICK_CELLS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round and side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set, not inherited)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args
