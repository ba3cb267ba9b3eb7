"""Benchmark: train-step time of BERT_EWE vs BERT_ORIG at equal u (EWE §6: "no meaningful overhead").

Both models come from their real configs (conf/model/bert_{ewe,orig}.yaml) at a reduced width so the
measurement fits a CPU; steps are interleaved so drift (thermal, other load) hits both equally.
Writes outputs/bench/ewe_step_ratio.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import langrepr.train  # noqa: F401  (registers the config resolvers)
from langrepr.tasks.optim import parameter_groups
from langrepr.utils import PROJECT_ROOT, write_json_atomic

SIZE = ["model.net.hidden_size=384", "model.net.num_layers=4", "model.net.intermediate_size=1536"]


def build(model: str, num_labels: int) -> tuple[torch.nn.Module, dict]:
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"model={model}", *SIZE])
    net = instantiate(cfg.model.net, num_labels=num_labels)
    return net, {"u": cfg.model.tokenizer.get("u", cfg.model.tokenizer.get("max_length")),
                 "v": cfg.model.tokenizer.get("v", 1), "heads": cfg.model.net.num_heads}


def batch_for(model: str, shape: dict, batch: int, generator: torch.Generator) -> dict:
    u = shape["u"]
    if model == "bert_ewe":   # whitespace materials: 3-10 letter words padded to v bytes
        ids = torch.randint(97, 123, (batch, u, shape["v"]), generator=generator)
        lengths = torch.randint(3, 11, (batch, u, 1), generator=generator)
        ids = ids.masked_fill(torch.arange(shape["v"]) >= lengths, 0)
    else:
        ids = torch.randint(5, 30522, (batch, u), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, u, dtype=torch.long),
            "labels": (torch.rand(batch, 1328, generator=generator) < 0.003).float()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    models, times = {}, {}
    for name in ("bert_ewe", "bert_orig"):
        net, shape = build(name, 1328)
        opt = torch.optim.AdamW(parameter_groups(net, 0.01), lr=2e-5)
        models[name] = (net, opt, batch_for(name, shape, args.batch, generator), shape)
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
