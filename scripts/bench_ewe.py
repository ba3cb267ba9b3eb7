"""Benchmark: train-step time of BERT_EWE vs BERT_ORIG at equal u (EWE §6: "no meaningful overhead").

Both models come from their real configs (conf/papers/ewe/model/bert_{ewe,orig}.yaml) at a reduced width so the
measurement fits a CPU. The ratio is measured in interleaved rounds (src/langrepr/benchmarking.py): each round
times a few steps of each model, its ratio is EWE / ORIG of the round's median steps, and the result is the
median and spread of the per-round ratios — once on the machine as it is and once with a second,
training-like process competing for the cores. The thread count is set, not inherited (`--threads`, default
1): with as many threads as cores, every parallel op of a step waits for its slowest thread, and a competing
process makes that thread late (see README, `make bench`). Each step is split into forward / backward /
optimizer so the ratio can be traced to a phase.
Writes outputs/bench/ewe_step_ratio.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from langrepr.benchmarking import (
    build_net,
    competing_process,
    describe,
    interleaved_rounds,
    machine_load,
    random_batch,
    spread,
    write_bench,
)
from langrepr.tasks.optim import parameter_groups
from langrepr.utils import PROJECT_ROOT

SIZE = ["model.net.hidden_size=384", "model.net.num_layers=4", "model.net.intermediate_size=1536"]
PHASES = ("forward", "backward", "optimizer")


def build(batch: int, ewe_heads: int | None) -> dict:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    models = {}
    for name in ("bert_ewe", "bert_orig"):
        heads = [f"model.net.num_heads={ewe_heads}"] if name == "bert_ewe" and ewe_heads else []
        net, shape = build_net(name, SIZE + heads)
        opt = torch.optim.AdamW(parameter_groups(net, 0.01), lr=2e-5)
        models[name] = (net, opt, random_batch(shape, batch, 1328, generator), shape)
    return models


def step(model: tuple) -> dict[str, float]:
    """One train step, timed per phase."""
    net, opt, batch, _ = model
    t0 = time.perf_counter()
    logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["labels"])
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    opt.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    return {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "step": t3 - t0}


def measure(models: dict, rounds: int, steps: int) -> dict:
    """Per-round medians of each model's steps and the per-round EWE/ORIG ratios, overall and per phase."""
    def timed(name: str):
        return lambda: [step(models[name]) for _ in range(steps)]

    runs = interleaved_rounds({name: timed(name) for name in models}, rounds)
    per_round = {name: [{k: statistics.median(s[k] for s in r) for k in ("step", *PHASES)} for r in rs]
                 for name, rs in runs.items()}
    ratios = {k: spread([e[k] / o[k] for e, o in zip(per_round["bert_ewe"], per_round["bert_orig"])])
              for k in ("step", *PHASES)}
    step_ms = {name: spread([r["step"] * 1e3 for r in rs]) for name, rs in per_round.items()}
    phase_ms = {name: {k: statistics.median(r[k] for r in rs) * 1e3 for k in PHASES} for name, rs in per_round.items()}
    return {"ratio": ratios["step"], "phase_ratio": {k: ratios[k] for k in PHASES}, "step_ms": step_ms,
            "phase_ms": phase_ms, "load": machine_load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2, help="steps of each model per round")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (set, not inherited)")
    parser.add_argument("--competitor-threads", type=int, default=2,
                        help="threads of the competing process (2 = a default torch job on a 2-core machine)")
    parser.add_argument("--no-competitor", action="store_true", help="measure the machine as it is only")
    parser.add_argument("--ewe-heads", type=int, default=None,
                        help="diagnosis: give BERT_EWE this many heads instead of the paper's h = v (16)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = build(args.batch, args.ewe_heads)
    for model in models.values():   # warm-up: allocator, kernels, AdamW state
        step(model), step(model)
    conditions = {"as is": measure(models, args.rounds, args.steps)}
    if not args.no_competitor:
        with competing_process(args.competitor_threads):
            conditions["competing"] = measure(models, args.rounds, args.steps)
    worst = max(c["ratio"]["median"] for c in conditions.values())
    stem = "ewe_step_ratio" if args.ewe_heads is None else f"ewe_step_ratio_ewe_h{args.ewe_heads}"
    result = {
        "name": stem, "ratio": conditions["as is"]["ratio"]["median"],
        "target": "<= 1.00 at the median, as is and with a competing process",
        "details": {
            "conditions": conditions, "rounds": args.rounds, "steps_per_round": args.steps, "batch": args.batch,
            "u": models["bert_ewe"][3]["u"], "v": models["bert_ewe"][3]["v"], "size_overrides": SIZE,
            "params": {n: sum(p.numel() for p in m[0].parameters()) for n, m in models.items()},
            "ewe_heads": models["bert_ewe"][3]["heads"], "orig_heads": models["bert_orig"][3]["heads"],
            "device": "cpu", "threads": torch.get_num_threads(), "competitor_threads": args.competitor_threads,
            "torch": torch.__version__,
        },
    }
    out = PROJECT_ROOT / "outputs" / "bench" / f"{stem}.json"
    write_bench(out, result)
    for label, c in conditions.items():
        phases = ", ".join(f"{k} {c['phase_ratio'][k]['median']:.2f}" for k in PHASES)
        print(f"ewe_step_ratio ({label}, {args.threads} thread(s), load {c['load']['loadavg_1_5_15'][0]}): "
              f"BERT_EWE / BERT_ORIG train step = {describe(c['ratio'])}; "
              f"{c['step_ms']['bert_ewe']['median']:.0f} ms vs {c['step_ms']['bert_orig']['median']:.0f} ms; "
              f"per phase: {phases}")
    verdict = "meets" if worst <= 1.0 else "misses"
    print(f"ewe_step_ratio: u={result['details']['u']}, batch {args.batch}, heads {result['details']['ewe_heads']} "
          f"(EWE) vs {result['details']['orig_heads']} (ORIG) — {verdict} target <= 1.00 at the median in "
          f"{'both conditions' if len(conditions) > 1 else 'this condition'}; wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
