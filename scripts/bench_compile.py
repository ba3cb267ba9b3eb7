"""Benchmark: `torch.compile` against eager on one quick training cell per paper (issue 22: keep it where it pays).

Each cell is composed and built as `langrepr.train` builds it, twice from the same seed: once eager, once with
`net.compile()` (in place, so parameter names and checkpoints are unchanged). Both run the cell's own Lightning
Trainer for `warmup + steps` steps in interleaved rounds; the ratio is compiled / eager steady-state steps/s per
round (median and spread), and the compiled side's first round reports the one-time compilation in its start-up.
The training loss after the timed steps of each round is reported beside it, so a speed-up that changes the
numbers would show. Cells that need data absent here are skipped with their reason.
Writes outputs/bench/compile.json as [{"name", "ratio", "target", "details"}].
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pytorch_lightning as pl
import torch

from langrepr import benchmarking as bench
from langrepr.utils import PROJECT_ROOT, write_json_atomic

# one quick cell per paper (the data each needs under LANGREPR_DATA_DIR, None: generated)
CELLS = {
    "ewe": (["experiment=ewe_table3", "profile=quick", "dataset=synthetic", "model=bert_ewe"], None),
    "tensorcoder": (["experiment=tensorcoder_table3", "profile=quick", "dataset=multi30k", "model=tensorcoder_1conv_nmt"], "multi30k"),
    "leam": (["experiment=leam_table2", "profile=quick", "dataset=ag_news", "model=leam"], "agnews"),
    "multihot": (["experiment=grid", "profile=quick", "grid_task=nsmc_text", "input=multihot", "encoder=bert"], "nsmc"),
    "bitcipher": (["experiment=bitcipher_figure4", "profile=quick", "dataset=ptb_causal", "lm_init=cold"], "ptb"),
}


def last_loss(task) -> float | None:
    value = task.trainer.callback_metrics.get("train/loss") if task.trainer is not None else None
    return None if value is None else float(value)


def measure(paper: str, overrides: list[str], steps: int, warmup: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = bench.compose_cell([*overrides, f"paths.cache_dir={tmp}/cache", f"paths.output_dir={tmp}/run"])
        built = {}
        for side in ("eager", "compiled"):
            pl.seed_everything(1, verbose=False)
            dm, net, task = bench.build_cell(cfg)
            if side == "compiled":
                net.compile()
            built[side] = (dm, task)

        def fit(side: str):
            dm, task = built[side]
            result = bench.lightning_fit(cfg, dm, task, steps, warmup, Path(tmp) / side)
            return {**result, "loss": last_loss(task)}

        runs = bench.interleaved_rounds({side: (lambda s=side: fit(s)) for side in built}, rounds)
    ratio = bench.spread([c["steps_per_s"] / e["steps_per_s"] for c, e in zip(runs["compiled"], runs["eager"])])
    details = {
        "cell": " ".join(overrides), "steps_per_round": steps, "warmup_steps": warmup, "rounds": rounds,
        "steps_per_s": {k: bench.spread([r["steps_per_s"] for r in v]) for k, v in runs.items()},
        "first_startup_s": {k: v[0]["startup_s"] for k, v in runs.items()},
        "first_warmup_s": {k: v[0]["warmup_s"] for k, v in runs.items()},   # compilation is paid here, once
        "train_loss_per_round": {k: [r["loss"] for r in v] for k, v in runs.items()},
        "threads": torch.get_num_threads(), "load": bench.machine_load(), "torch": torch.__version__,
    }
    return {"name": f"compile_{paper}", "ratio": ratio["median"], "ratio_spread": ratio,
            "target": "> 1.1 (compiled / eager steps/s) to switch it on", "details": details}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", nargs="*", default=list(CELLS), choices=list(CELLS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round and side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set, not inherited)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data_dir = os.environ.get("LANGREPR_DATA_DIR")
    results = []
    for paper in args.papers:
        overrides, needs = CELLS[paper]
        if needs and not (data_dir and Path(data_dir, needs).exists()):
            print(f"compile_{paper}: skipped, needs {needs}/ under LANGREPR_DATA_DIR")
            continue
        try:
            row = measure(paper, overrides, args.steps, args.warmup, args.rounds)
        except Exception as err:   # a cell inductor cannot compile is a finding, not a crash of the benchmark
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            results.append({"name": f"compile_{paper}", "ratio": None, "target": "compiles", "error": reason,
                            "details": {"cell": " ".join(overrides), "torch": torch.__version__}})
            print(f"compile_{paper}: torch.compile failed on this cell: {reason}", flush=True)
            continue
        results.append(row)
        sps, warm = row["details"]["steps_per_s"], row["details"]["first_warmup_s"]
        print(f"compile_{paper} ({args.threads} thread(s), load {row['details']['load']['loadavg_1_5_15'][0]}): "
              f"compiled / eager steps/s = {bench.describe(row['ratio_spread'])}; {sps['compiled']['median']:.2f} vs "
              f"{sps['eager']['median']:.2f} steps/s; first {args.warmup} steps {warm['compiled']:.1f} s vs "
              f"{warm['eager']:.1f} s (compilation, once per cell); train loss "
              f"{row['details']['train_loss_per_round']['compiled'][-1]} vs "
              f"{row['details']['train_loss_per_round']['eager'][-1]}", flush=True)
    out = PROJECT_ROOT / "outputs" / "bench" / "compile.json"
    kept = [r for r in (json.loads(out.read_text()) if out.exists() else []) if r["name"] not in
            {r["name"] for r in results}]          # a run of some papers keeps the others' measurements
    write_json_atomic(out, kept + results)
    print(f"wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
