"""One GPU check (issue 23): a full-size cell per paper in fp16 and bf16, and TensorCoder's attention against SDPA.

For one cell of each paper, built from its real config (`langrepr.plan` composes the cell as `make` would and
feeds the network random inputs of the real shapes and vocabulary; no data files): train steps/s, samples/s and
peak memory with `torch.autocast` in fp16 (with GradScaler) and bf16, and the model FLOPs utilisation = FLOPs per
step (`torch.utils.flop_counter.FlopCounterMode` on the real shapes) x steps/s / the GPU's peak (`langrepr.plan.
PEAK_TFLOPS`, keyed by `torch.cuda.get_device_name()`). A batch that runs out of memory is halved until one fits
(the JSON says which). Then TensorCoder's dimension-wise attention layer against an SDPA layer (flash where
available) at N = 512, 1,024, ..., 16,384: forward time and memory, an out-of-memory point recorded as such.

    python scripts/gpu_check.py                      # on a GPU, < 5 min; writes docs/gpu/gpu_check_<gpu>.json
    python scripts/gpu_check.py --device cpu --small # the same code at tiny widths (tests/test_gpu_check.py)

`python -m langrepr.plan` then projects GPU time at the measured fp16 utilisation of each paper.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import platform
import re
import statistics
import time
from pathlib import Path

import torch

from langrepr.confpaths import group_options
from langrepr.plan import PEAK_SOURCE, compose_cell, peak_for, stages
from langrepr.utils import PROJECT_ROOT, write_json_atomic

# (paper, row, the cell as `make` composes it, tiny widths for --small)
CELLS = [
    ("ewe", "bert_ewe", ["experiment=ewe_table3", "model=bert_ewe", "dataset=uspto"],
     ["model.net.hidden_size=48", "model.net.num_layers=1", "model.net.intermediate_size=64", "dataset.max_tokens=16"]),
    ("tensorcoder", "transformer_8head", ["experiment=tensorcoder_table1", "model=transformer_8head", "dataset=ptb",
                                          "seed=1"],
     ["model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
      "dataset.datamodule.seq_len=16"]),
    ("tensorcoder", "tensorcoder_8conv", ["experiment=tensorcoder_table1", "model=tensorcoder_8conv", "dataset=ptb",
                                          "seed=1"],
     ["model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
      "dataset.datamodule.seq_len=16"]),
    ("multihot", "multihot_basic", ["experiment=multihot_pretrain", "model=multihot_basic", "mlm.loss=mhsce",
                                    "pipeline.token_list=bpe_syllable", "seed=1"],
     ["model.net.hidden_size=32", "model.net.num_layers=1", "model.net.num_heads=2", "model.net.intermediate_size=64",
      "model.net.max_positions=16", "model.net.max_group=4"]),
    ("leam", "leam", ["experiment=leam_table2", "model=leam", "dataset=ag_news", "seed=1"],
     ["model.net.hidden_size=16", "dataset.max_length=32", "model.net.window=5"]),
    ("bitcipher", "causal_lm", ["experiment=bitcipher_figure4", "lm_init=cold", "seed=1"],
     ["model.net.hidden_size=16", "model.net.num_layers=1", "model.net.num_heads=2", "model.net.intermediate_size=32",
      "dataset.datamodule.seq_len=16"]),
]
# the multi-hot MLM where pretraining is the first stage of a Table 3 pipeline cell
FALLBACK = {"multihot_basic": ["experiment=multihot_table3", "model=multihot_basic", "dataset=modu_newspaper",
                               "downstream=ner", "pipeline.token_list=bpe_syllable", "seed=1"]}
PRECISIONS = {"fp16": torch.float16, "bf16": torch.bfloat16}
ATTENTION_N = [512, 1024, 2048, 4096, 8192, 16384]
TIME_BUDGET_S = 270        # leave room under the 5 minutes for start-up and writing


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_mib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def count_flops(work, net, x, dtype, device) -> int:
    """FLOPs of one forward + backward on these inputs (SDPA's math backend on CPU, whose fused kernel is uncounted)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    backend = sdpa_kernel(SDPBackend.MATH) if device.type == "cpu" else contextlib.nullcontext()
    with backend, FlopCounterMode(display=False) as counter:
        with torch.autocast(device.type, dtype=dtype):
            loss = work.loss(net, x)
        loss.backward()
    net.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def train_rate(work, net, x, dtype, device, optimizer: str, steps: int, warmup: int, max_s: float) -> dict:
    """Steps/s of forward (autocast) + scaled backward + optimiser step at one batch; peak memory over the run."""
    opt = (torch.optim.Adam if optimizer == "Adam" else torch.optim.AdamW)(net.parameters(), lr=1e-5)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16 and device.type == "cuda")

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype):
            loss = work.loss(net, x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    reset_peak(device)
    for _ in range(warmup):
        step()
    sync(device)
    start, done = time.perf_counter(), 0
    while done < steps and (done == 0 or time.perf_counter() - start < max_s):
        step()
        done += 1
        if device.type == "cuda" and done % 2 == 0:
            sync(device)
    sync(device)
    seconds = (time.perf_counter() - start) / done
    return {"steps_per_s": 1 / seconds, "step_s": seconds, "timed_steps": done, "peak_mem_mib": peak_mib(device)}


def check_cell(paper: str, row: str, overrides: list[str], small: list[str], args, device, peak) -> dict:
    """Compose the cell, build its network at full size (tiny with --small), time it in fp16 and bf16."""
    if overrides[0].split("=", 1)[1] not in group_options("experiment"):
        overrides = FALLBACK[row]      # a tree from before multihot pretraining became its own train cell
    cfg, findings = compose_cell(["profile=full", *overrides, *(small if args.small else [])])
    stage = stages(cfg)[0]
    batch = 2 if args.small else stage.batch
    torch.manual_seed(0)
    net = stage.work.build().to(device).train()
    generator = torch.Generator().manual_seed(0)
    out = {"cell": overrides, "stage": stage.name, "kind": stage.work.kind, "shape": stage.work.shape,
           "params": sum(p.numel() for p in net.parameters()), "batch": batch, "optimizer": stage.optimizer,
           "findings": findings}
    micro, ooms = batch, []
    while True:
        try:
            x = stage.work.inputs(micro, device, generator)
            flops = count_flops(stage.work, net, x, torch.float16, device)
            results = {name: train_rate(stage.work, net, x, dtype, device, stage.optimizer, args.steps, args.warmup,
                                        args.max_seconds) for name, dtype in PRECISIONS.items()}
            break
        except torch.OutOfMemoryError:
            ooms.append(micro)
        # freed outside the handler: its traceback holds the frames with the batch and the optimiser states
        x = None
        net.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        if micro == 1:
            return out | {"oom_batches": ooms, "error": "out of memory at micro-batch 1"}
        micro //= 2
    out.update(micro_batch=micro, accumulation=batch // micro, oom_batches=ooms, flops_per_step=flops)
    for name, r in results.items():
        r["samples_per_s"] = r["steps_per_s"] * micro
        r["mfu"] = flops * r["steps_per_s"] / (peak[name] * 1e12) if peak else None
        out[name] = r
    del net, x
    return out


def attention_point(n: int, args, device, dtype) -> dict:
    """Forward ms, peak MiB and GFLOPs of a TensorCoder-8conv layer and of an 8-head SDPA layer at length n."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from langrepr.models.baseline_attention import MultiHeadSDPAttention
    from langrepr.models.tensorcoder_attention import TensorCoderAttention

    d = args.attention_width
    layers = {"tensorcoder_8conv": TensorCoderAttention(d, n_filters=8),
              "sdpa_8head": MultiHeadSDPAttention(d, n_heads=8)}
    point = {"n": n}
    for name, layer in layers.items():
        layer = layer.to(device=device, dtype=dtype).eval()
        backends = ([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
                    if device.type == "cuda" else [SDPBackend.MATH])
        try:
            x = torch.randn(args.attention_batch, n, d, device=device, dtype=dtype)
            with torch.no_grad(), sdpa_kernel(backends):
                reset_peak(device)
                base = torch.cuda.memory_allocated() if device.type == "cuda" else 0
                layer(x)
                sync(device)
                times = []
                for _ in range(args.attention_repeats):
                    start = time.perf_counter()
                    layer(x)
                    sync(device)
                    times.append((time.perf_counter() - start) * 1e3)
                peak = peak_mib(device)
                with FlopCounterMode(display=False) as counter:
                    layer(x)
            point[name] = {"forward_ms": statistics.median(times), "peak_mib": None if peak is None else peak - base / 2**20,
                           "gflops": counter.get_total_flops() / 1e9}
        except torch.OutOfMemoryError:
            point[name] = {"oom": True}
        finally:
            x = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if device.type == "cuda":
        point["sdpa_backend"] = sdpa_backend_used(args, device, dtype)
    return point


def sdpa_backend_used(args, device, dtype) -> str:
    """Whether flash attention runs here at this width and dtype (else the efficient or the math kernel)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 8, 128, args.attention_width // 8, device=device, dtype=dtype)
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        try:
            with sdpa_kernel([backend]):
                torch.nn.functional.scaled_dot_product_attention(q, q, q)
            return backend.name.lower()
        except RuntimeError:
            continue
    return "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny widths and lengths (a test of this script)")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "docs" / "gpu"), help="folder for the JSON")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per cell and precision")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=12.0, help="cap on the timed part of one measurement")
    parser.add_argument("--attention-width", type=int, default=512, help="d_model of the attention comparison")
    parser.add_argument("--attention-batch", type=int, default=2)
    parser.add_argument("--attention-repeats", type=int, default=5)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here: run on a GPU machine, or pass --device cpu --small")
    if args.small:
        args.steps, args.warmup, args.attention_width, args.attention_repeats = 2, 1, 32, 2
    device = torch.device(args.device)
    began = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    peak = peak_for(name) if device.type == "cuda" else None
    record = {"name": "gpu_check", "device": str(device), "device_name": name, "small": args.small,
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "peak_tflops": peak, "peak_source": PEAK_SOURCE if peak else "no peak known for this device: MFU null",
              "method": "batch = the cell's (2 with --small), halved on out-of-memory; autocast fp16 + GradScaler and "
                        "bf16; AdamW (Adam where the cell uses it); FLOPs per step by FlopCounterMode on the real "
                        "shapes; MFU = FLOPs per step x steps/s / peak",
              "papers": {}}
    for paper, row, overrides, small in CELLS:
        print(f"{paper}/{row} ...", flush=True)
        try:
            result = check_cell(paper, row, overrides, small, args, device, peak)
        except Exception as err:  # noqa: BLE001  (one cell failing must not cost the other measurements)
            result = {"cell": overrides, "error": " ".join(str(err).split())[:400]}
        record["papers"].setdefault(paper, {})[row] = result
        if device.type == "cuda":
            torch.cuda.empty_cache()
        for prec in PRECISIONS:
            r = result.get(prec)
            if r:
                mfu = "n/a" if r["mfu"] is None else f"{r['mfu']:.1%}"
                mem = "n/a" if r["peak_mem_mib"] is None else f"{r['peak_mem_mib'] / 1024:.2f} GiB"
                print(f"  {prec}: {r['steps_per_s']:.2f} steps/s, {r['samples_per_s']:.1f} samples/s, peak {mem}, MFU {mfu}")
        if result.get("error"):
            print(f"  error: {result['error']}")
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    ns = [16, 32] if args.small else ATTENTION_N
    points = []
    for n in ns:
        if time.perf_counter() - began > TIME_BUDGET_S:
            points.append({"n": n, "skipped": "time budget"})
            continue
        points.append(attention_point(n, args, device, dtype))
        print(f"attention N={n}: " + ", ".join(f"{k} {v.get('forward_ms', float('nan')):.2f} ms" if isinstance(v, dict)
                                               and "forward_ms" in v else f"{k} {v}"
                                               for k, v in points[-1].items() if k != "n"), flush=True)
    record["attention"] = {"d_model": args.attention_width, "batch": args.attention_batch, "dtype": str(dtype),
                           "layers": "TensorCoderAttention(8 filters, d_head = d_model) vs MultiHeadSDPAttention(8 heads "
                                     "of d_model/8); both with Q/K/V/O projections; forward only, no grad",
                           "points": points}
    record["wall_s"] = time.perf_counter() - began
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "device"
    out = Path(args.out) / f"gpu_check_{'small_' if args.small else ''}{slug}.json"
    write_json_atomic(out, record)
    print(f"wrote {out} ({record['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
