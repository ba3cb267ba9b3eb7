"""Benchmark: train-step time of BERT_EWE vs BERT_ORIG at equal u (EWE §6: "no meaningful overhead").

Both models come from their real configs (conf/model/bert_{ewe,orig}.yaml) at a reduced width so the
measurement fits a CPU; steps are interleaved so drift (thermal, other load) hits both equally.
Writes outputs/bench/ewe_step_ratio.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from langrepr.benchmarking import build_net, random_batch
from langrepr.tasks.optim import parameter_groups
from langrepr.utils import PROJECT_ROOT, write_json_atomic

SIZE = ["model.net.hidden_size=384", "model.net.num_layers=4", "model.net.intermediate_size=1536"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    models, times = {}, {}
    for name in ("bert_ewe", "bert_orig"):
        net, shape = build_net(name, SIZE)
        opt = torch.optim.AdamW(parameter_groups(net, 0.01), lr=2e-5)
        models[name] = (net, opt, random_batch(shape, args.batch, 1328, generator), shape)
        times[name] = []

    def step(name: str) -> float:
        net, opt, batch, _ = models[name]
        start = time.perf_counter()
        logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["labels"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    for name in models:   # warm-up: allocator, kernels, AdamW state
        step(name), step(name)
    for _ in range(args.steps):
        for name in models:
            times[name].append(step(name))
    median = {name: statistics.median(t) for name, t in times.items()}
    ratio = median["bert_ewe"] / median["bert_orig"]
    result = {
        "name": "ewe_step_ratio", "ratio": ratio, "target": "<= 1.00 (EWE train step no slower than ORIG)",
        "details": {
            "median_step_s": median, "steps": args.steps, "batch": args.batch,
            "u": models["bert_ewe"][3]["u"], "v": models["bert_ewe"][3]["v"], "size_overrides": SIZE,
            "params": {n: sum(p.numel() for p in m[0].parameters()) for n, m in models.items()},
            "device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__,
        },
    }
    out = PROJECT_ROOT / "outputs" / "bench" / "ewe_step_ratio.json"
    write_json_atomic(out, result)
    verdict = "meets" if ratio <= 1.0 else "misses"
    print(f"ewe_step_ratio: BERT_EWE / BERT_ORIG train step = {ratio:.3f} "
          f"({median['bert_ewe'] * 1e3:.0f} ms vs {median['bert_orig'] * 1e3:.0f} ms, u={result['details']['u']}, "
          f"batch {args.batch}) — {verdict} target <= 1.00; wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
