"""Benchmark LEAM's speed claim (ACL 2018, Table 4 / §5): a training step near SWEM's cost, far below RNN's.

Builds LEAM, SWEM-concat, the Kim CNN and the BiLSTM from conf/papers/leam/model/*.yaml (300-d vectors, as the paper)
and times Adam training steps on the same random batch (default 50 texts x 128 words, 10 labels, 20,000-word
vocabulary) in one process, interleaving models round by round so background load hits all alike; each
model's time is its fastest round. Prints and writes outputs/bench/leam_step_time.json with the ratios
CNN / LEAM, BiLSTM / LEAM and LEAM / SWEM (targets: > 1, > 1, <= 1.5). About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse

import torch
from hydra import compose, initialize_config_dir

import langrepr.train  # noqa: F401  (registers the config resolvers)
from langrepr.benchmarking import write_bench
from langrepr.confpaths import CONF_DIR
from langrepr.pipelines.references.classification import time_training_iterations
from langrepr.utils import PROJECT_ROOT

MODELS = ["leam", "swem_concat", "kim_cnn", "bilstm"]


def net_config(model: str, length: int):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"model={model}", "dataset=yahoo", f"dataset.max_length={length}"])
    return cfg.model.net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = {m: net_config(m, args.length) for m in MODELS}
    best: dict[str, float] = {}
    params: dict[str, float] = {}
    for _ in range(args.rounds):
        for model, cfg in configs.items():
            out = time_training_iterations(cfg, vocab_size=20000, num_labels=10, batch_size=args.batch,
                                           length=args.length, iterations=args.steps, warmup=1)
            best[model] = min(best.get(model, float("inf")), out["time/s_per_1000_iter"])
            params[model] = out["params/non_embedding"]
    ratios = {"cnn_over_leam": best["kim_cnn"] / best["leam"], "bilstm_over_leam": best["bilstm"] / best["leam"],
              "leam_over_swem": best["leam"] / best["swem_concat"]}
    targets = {"cnn_over_leam": "> 1", "bilstm_over_leam": "> 1", "leam_over_swem": "<= 1.5"}
    for name, value in ratios.items():
        print(f"{name:18s} {value:6.2f}   (target {targets[name]})")
    print("s per 1,000 steps: " + ", ".join(f"{m} {t:.1f}" for m, t in best.items()))
    device = "cuda" if torch.cuda.is_available() else f"cpu x{args.threads}"
    write_bench(PROJECT_ROOT / "outputs" / "bench" / "leam_step_time.json", {
        "name": "leam_step_time", "ratio": ratios, "target": targets,
        "details": {"s_per_1000_steps": best, "params_non_embedding": params, "batch": args.batch,
                    "length": args.length, "device": device, "rounds": args.rounds, "steps": args.steps}})


if __name__ == "__main__":
    main()
