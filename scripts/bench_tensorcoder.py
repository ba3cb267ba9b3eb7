"""Benchmark TensorCoder's complexity claims (arXiv 2008.01547 §3.5, §5.1).

1. Encoder attention wall time vs sequence length N (batch 1, d = 64, forward, CPU) for
   TensorCoderAttention (1 filter) and SDPA (1 head), both with their Q/K/V/O projections. The log-log
   slope over N = 512..8192 should be ~1 for TensorCoder (target <= 1.1) and ~2 for SDPA as N grows; the
   crossover is the smallest N from which TensorCoder is faster at every longer N measured.
2. Attention GFLOPs at the PTB settings of Table 1 (N = 100), counted by the models' own
   ``extra_metrics`` on nets built from conf/papers/tensorcoder/model/*.yaml with the experiment's widths: the
   Transformer-8head / TensorCoder-8conv ratio (paper 3.05, target >= 3) and 1head / 1conv (paper 1.06).

Writes outputs/bench/tensorcoder_scaling.json and outputs/bench/tensorcoder_flops.json as
{"name", "value" | "ratio", "target", "details"}. About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import langrepr.train  # noqa: F401  (registers the config resolvers)
from langrepr.benchmarking import write_bench
from langrepr.confpaths import CONF_DIR
from langrepr.models.baseline_attention import MultiHeadSDPAttention
from langrepr.models.tensorcoder_attention import TensorCoderAttention
from langrepr.utils import PROJECT_ROOT

FIT_NS = [512, 1024, 2048, 4096, 8192]
CROSSOVER_NS = [16, 32, 64, 128, 256]
TABLE1_MODELS = ["transformer_1head", "tensorcoder_1conv", "transformer_8head", "tensorcoder_8conv"]


def time_forward(module: torch.nn.Module, n: int, d: int, repeats: int) -> float:
    """Fastest of ``repeats`` forward times (s) of module(x), x of shape (1, n, d).

    The minimum, not the median: on a shared machine other load only ever adds time.
    """
    x = torch.randn(1, n, d)
    with torch.no_grad():
        module(x), module(x)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            module(x)
            times.append(time.perf_counter() - start)
    return min(times)


def loglog_slope(ns: list[int], ts: list[float]) -> float:
    xs, ys = [math.log(n) for n in ns], [math.log(t) for t in ts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def scaling(d: int, repeats: int) -> dict:
    torch.manual_seed(0)
    modules = {"tensorcoder": TensorCoderAttention(d, n_filters=1).eval(),
               "sdpa": MultiHeadSDPAttention(d, n_heads=1).eval()}
    ns = CROSSOVER_NS + FIT_NS
    times = {name: {n: time_forward(m, n, d, repeats) for n in ns} for name, m in modules.items()}
    slopes = {name: loglog_slope(FIT_NS, [t[n] for n in FIT_NS]) for name, t in times.items()}
    faster = [n for n in ns if times["tensorcoder"][n] < times["sdpa"][n]]
    crossover = next((n for n in ns if all(m in faster for m in ns if m >= n)), None)
    return {
        "name": "tensorcoder_scaling_exponent", "value": slopes["tensorcoder"], "target": "<= 1.1",
        "details": {
            "sdpa_exponent": slopes["sdpa"], "crossover_n": crossover, "fit_n": FIT_NS, "d": d, "batch": 1,
            "min_forward_s": {name: {str(n): t[n] for n in ns} for name, t in times.items()},
            "speedup_at_8192": times["sdpa"][8192] / times["tensorcoder"][8192],
            "modules": "TensorCoderAttention(n_filters=1) vs MultiHeadSDPAttention(n_heads=1), projections included",
            "device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__, "repeats": repeats,
        },
    }


def flops() -> dict:
    gflops, settings = {}, None
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for model in TABLE1_MODELS:
            cfg = compose("train", overrides=["experiment=tensorcoder_table1", f"model={model}", "dataset=ptb"])
            seq_len = cfg.dataset.datamodule.seq_len
            net = instantiate(cfg.model.net, vocab_size=10002, max_len=seq_len, flops_seq_len=seq_len)
            gflops[model] = net.extra_metrics()
            settings = {k: cfg.model.net[k] for k in ("hidden_size", "num_layers", "intermediate_size")}
            settings["seq_len"] = seq_len
    total = {m: g["model/attn_gflops"] for m, g in gflops.items()}
    ratio8 = total["transformer_8head"] / total["tensorcoder_8conv"]
    return {
        "name": "tensorcoder_flops_ratio_8head_over_8conv_ptb", "ratio": ratio8, "target": ">= 3 (paper 3.05)",
        "details": {
            "ratio_1head_over_1conv": total["transformer_1head"] / total["tensorcoder_1conv"],
            "paper": {"ratio_8head_over_8conv": 0.284 / 0.093, "ratio_1head_over_1conv": 0.035 / 0.033,
                      "gflops": {"transformer_1head": 0.035, "tensorcoder_1conv": 0.033,
                                 "transformer_8head": 0.284, "tensorcoder_8conv": 0.093}},
            "gflops_all_encoder_layers": total,
            "gflops_one_layer": {m: g["model/attn_gflops_layer"] for m, g in gflops.items()},
            "settings": settings, "counter": "torch.utils.flop_counter, forward, batch 1, matmuls (2 FLOPs/MAC)",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1, help="1 keeps timings stable on a shared CPU")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out_dir = PROJECT_ROOT / "outputs" / "bench"
    scale = scaling(args.d, args.repeats)
    write_bench(out_dir / "tensorcoder_scaling.json", scale)
    det = scale["details"]
    print(f"tensorcoder_scaling: time ~ N^{scale['value']:.2f} for TensorCoder vs N^{det['sdpa_exponent']:.2f} for "
          f"SDPA (N = 512..8192, d = {args.d}) — {'meets' if scale['value'] <= 1.1 else 'misses'} target <= 1.1; "
          f"TensorCoder faster from N = {det['crossover_n']}, {det['speedup_at_8192']:.1f}x at N = 8192")
    fl = flops()
    write_bench(out_dir / "tensorcoder_flops.json", fl)
    det = fl["details"]
    print(f"tensorcoder_flops: attention GFLOPs at PTB settings {det['settings']}: 8head/8conv = {fl['ratio']:.2f} "
          f"(paper 3.05) — {'meets' if fl['ratio'] >= 3 else 'misses'} target >= 3; 1head/1conv = "
          f"{det['ratio_1head_over_1conv']:.2f} (paper 1.06); wrote {out_dir.relative_to(PROJECT_ROOT)}/tensorcoder_*.json")


if __name__ == "__main__":
    main()
