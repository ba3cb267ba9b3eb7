"""Benchmark: data-loader wait as a fraction of train-step time in a quick EWE run (target < 5%).

Builds the quick-profile BERT_EWE cell on synthetic patents exactly as `make ewe-table3 PROFILE=quick`
does, then times, per step, waiting for the next batch vs forward + backward + AdamW.
Writes outputs/bench/ewe_loader_wait.json as {"name", "ratio", "target", "details"}.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import langrepr.train  # noqa: F401  (registers the config resolvers)
from langrepr.tasks.optim import parameter_groups
from langrepr.utils import PROJECT_ROOT, write_json_atomic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, initialize_config_dir(
            config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=ewe_table3", "profile=quick", "dataset=synthetic",
                                          "model=bert_ewe", f"paths.cache_dir={tmp}", "paths.output_dir=."])
        tokenizer = instantiate(cfg.model.tokenizer)
        dm = instantiate(cfg.dataset.datamodule, tokenizer=tokenizer)
        dm.prepare_data()
        dm.setup("fit")
        net = instantiate(cfg.model.net, **dm.net_kwargs)
        opt = torch.optim.AdamW(parameter_groups(net, 0.01), lr=cfg.optimizer.lr)
        wait = compute = 0.0
        steps = 0
        loader = iter(dm.train_dataloader())
        while steps < args.steps:
            t0 = time.perf_counter()
            try:
                batch = next(loader)
            except StopIteration:
                loader = iter(dm.train_dataloader())
                continue
            t1 = time.perf_counter()
            logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["labels"]).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t2 = time.perf_counter()
            if steps > 0:   # the first batch pays for worker start-up
                wait, compute = wait + (t1 - t0), compute + (t2 - t1)
            steps += 1
    ratio = wait / (wait + compute)
    result = {"name": "ewe_loader_wait", "ratio": ratio, "target": "< 0.05 of step time",
              "details": {"steps": args.steps - 1, "wait_s": wait, "compute_s": compute,
                          "batch_size": cfg.dataset.datamodule.batch_size,
                          "num_workers": cfg.dataset.datamodule.num_workers,
                          "tokenization_docs_per_s": dm.encode_stats.get("docs_per_s"),
                          "cell": "ewe_table3 quick, BERT_EWE, synthetic patents"}}
    out = PROJECT_ROOT / "outputs" / "bench" / "ewe_loader_wait.json"
    write_json_atomic(out, result)
    verdict = "meets" if ratio < 0.05 else "misses"
    print(f"ewe_loader_wait: loader wait = {100 * ratio:.2f}% of step time ({wait:.3f} s of "
          f"{wait + compute:.2f} s over {args.steps - 1} steps) — {verdict} target < 5%; "
          f"tokenization {dm.encode_stats.get('docs_per_s')} docs/s; wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
