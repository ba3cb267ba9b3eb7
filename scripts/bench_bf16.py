"""Benchmark: CPU bf16 autocast against fp32 on one quick training cell per paper (issue 22: use it where it pays).

Each cell is composed and built as `langrepr.train` builds it, twice from the same seed: once with
`trainer.precision=32-true`, once with `trainer.precision=bf16-mixed` (Lightning's CPU autocast). Both run the
cell's own Trainer for `warmup + steps` steps in interleaved rounds; the ratio is bf16 / fp32 steady-state steps/s
per round (median and spread). The training loss after each round's steps is reported beside it: a speed-up that
moves the loss beyond the rounds' own drift would show there (a table's metrics under bf16 are measured by
running the table, see docs/framework.md). On a CPU without AVX512-BF16 or AMX the bf16 side falls back to fp32
(one log line), so the ratio reads ~1 and the record says so. Cells whose data is absent are skipped.
Writes outputs/bench/bf16.json as [{"name", "ratio", "target", "details"}].
"""

from __future__ import annotations

from langrepr import benchmarking as bench
from langrepr.train import cpu_has_bf16
from langrepr.utils import PROJECT_ROOT

VARIANTS = {"fp32": (["trainer.precision=32-true"], None), "bf16": (["trainer.precision=bf16-mixed"], None)}


def measure(paper: str, steps: int, warmup: int, rounds: int) -> dict:
    overrides = bench.QUICK_CELLS[paper][0]
    runs = bench.compare_cell_variants(overrides, VARIANTS, steps, warmup, rounds)
    details = bench.variant_ratio(runs, "bf16", "fp32")
    ratio = details.pop("ratio_spread")
    details = {"cell": " ".join(overrides), "steps_per_round": steps, "warmup_steps": warmup, "rounds": rounds,
               "cpu_has_bf16": cpu_has_bf16(), **details}
    return {"name": f"bf16_{paper}", "ratio": ratio["median"], "ratio_spread": ratio,
            "target": "> 1.1 (bf16 / fp32 steps/s), with the table's metrics within noise, to switch it on",
            "details": details}


def main() -> None:
    args = bench.quick_cell_args(__doc__.splitlines()[0])
    results = []
    for paper in args.papers:
        if reason := bench.missing_data(paper):
            print(f"bf16_{paper}: skipped, {reason}")
            continue
        row = measure(paper, args.steps, args.warmup, args.rounds)
        results.append(row)
        d = row["details"]
        print(f"bf16_{paper} ({args.threads} thread(s), load {d['load']['loadavg_1_5_15'][0]}, bf16 on this CPU: "
              f"{d['cpu_has_bf16']}): bf16 / fp32 steps/s = {bench.describe(row['ratio_spread'])}; "
              f"{d['steps_per_s']['bf16']['median']:.2f} vs {d['steps_per_s']['fp32']['median']:.2f} steps/s; "
              f"train loss per round bf16 {[round(x, 4) for x in d['train_loss_per_round']['bf16'] if x is not None]}"
              f" vs fp32 {[round(x, 4) for x in d['train_loss_per_round']['fp32'] if x is not None]}", flush=True)
    bench.write_results(PROJECT_ROOT / "outputs" / "bench" / "bf16.json", results)


if __name__ == "__main__":
    main()
