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

import torch

from langrepr import benchmarking as bench
from langrepr.utils import PROJECT_ROOT


def measure(paper: str, steps: int, warmup: int, rounds: int) -> dict:
    overrides = bench.QUICK_CELLS[paper][0]
    runs = bench.compare_cell_variants(overrides, {"eager": ([], None), "compiled": ([], lambda net: net.compile())},
                                       steps, warmup, rounds)
    details = bench.variant_ratio(runs, "compiled", "eager")
    ratio = details.pop("ratio_spread")
    details = {"cell": " ".join(overrides), "steps_per_round": steps, "warmup_steps": warmup, "rounds": rounds,
               **details}
    return {"name": f"compile_{paper}", "ratio": ratio["median"], "ratio_spread": ratio,
            "target": "> 1.1 (compiled / eager steps/s) to switch it on", "details": details}


def main() -> None:
    args = bench.quick_cell_args(__doc__.splitlines()[0])
    results = []
    for paper in args.papers:
        if reason := bench.missing_data(paper):
            print(f"compile_{paper}: skipped, {reason}")
            continue
        try:
            row = measure(paper, args.steps, args.warmup, args.rounds)
        except Exception as err:   # a cell inductor cannot compile is a finding, not a crash of the benchmark
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            results.append({"name": f"compile_{paper}", "ratio": None, "target": "compiles", "error": reason,
                            "details": {"cell": " ".join(bench.QUICK_CELLS[paper][0]), "torch": torch.__version__}})
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
    bench.write_results(PROJECT_ROOT / "outputs" / "bench" / "compile.json", results)


if __name__ == "__main__":
    main()
