"""One GPU check (issue 23): a full-size cell per paper in fp16 and bf16, and TensorCoder's attention against SDPA.

For one cell of each paper, built from its real config (`langrepr.plan` composes the cell as `make` would and
feeds the network random inputs of the real shapes and vocabulary; no data files): train steps/s, samples/s and
peak memory with `torch.autocast` in fp16 (with GradScaler) and bf16, and the model FLOPs utilisation = FLOPs per
step (`torch.utils.flop_counter.FlopCounterMode` on the real shapes) x steps/s / the GPU's peak (`langrepr.plan.
PEAK_TFLOPS`, keyed by `torch.cuda.get_device_name()`). A batch that runs out of memory is halved until one fits
(the JSON says which). Then TensorCoder's dimension-wise attention layer against an SDPA layer (flash where
available) at N = 512, 1,024, ..., 16,384: forward time and memory, an out-of-memory point recorded as such.

Second version (issue 32), fields added only (`langrepr.plan` reads the first version's): per cell, the fp16 loop
eager against `torch.compile` in each mode (`compile`: steps/s, MFU, peak memory, compile seconds) and the CUDA
synchronisations per step (`syncs_per_step`, counted by `torch.cuda.set_sync_debug_mode`; null on CPU); the
product's own Lightning loop against this bare loop on TensorCoder's PTB cell (`loop`: a fixed number of steps
through `python -m langrepr.train`, validation off, timed at two step counts so start-up cancels); and 1/2/4/8
copies of that cell's bare loop in separate processes sharing the device (`packing`: aggregate steps/s). A part
that would pass the time budget is recorded as skipped; `--skip` leaves parts out.

    python scripts/gpu_check.py                      # on a GPU, < 5 min; writes docs/gpu/gpu_check_<gpu>.json
    python scripts/gpu_check.py --device cpu --small # the same code at tiny widths (tests/framework/test_gpu_check.py)

`python -m langrepr.plan` then projects GPU time at the measured fp16 utilisation of each paper.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
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
COMPILE_MODES = ["default", "reduce-overhead"]
PARTS = ("compile", "syncs", "loop", "packing")
LOOP_CELL = 2                 # CELLS[2]: TensorCoder-8conv on PTB, the cell the Lightning loop and packing run
PACK_COPIES = [1, 2, 4, 8]


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


def train_rate(work, net, x, dtype, device, optimizer: str, steps: int, warmup: int, max_s: float,
               graphs: bool = False, ready=None) -> dict:
    """Steps/s of forward (autocast) + scaled backward + optimiser step at one batch; peak memory over the run.

    `warmup_s` is the synchronised time of the warm-up steps: with a compiled net, the compilation lands there.
    """
    opt = (torch.optim.Adam if optimizer == "Adam" else torch.optim.AdamW)(net.parameters(), lr=1e-5)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16 and device.type == "cuda")

    def step() -> None:
        if graphs:   # CUDA graphs (mode reduce-overhead): a new iteration, so the last one's outputs may be reused
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device.type, dtype=dtype):
            loss = work.loss(net, x)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    reset_peak(device)
    began = time.perf_counter()
    for _ in range(warmup):
        step()
    sync(device)
    warmup_s = time.perf_counter() - began
    if ready is not None:
        ready()
    start, done = time.perf_counter(), 0
    while done < steps and (done == 0 or time.perf_counter() - start < max_s):
        step()
        done += 1
        if device.type == "cuda" and done % 2 == 0:
            sync(device)
    sync(device)
    seconds = (time.perf_counter() - start) / done
    return {"steps_per_s": 1 / seconds, "step_s": seconds, "timed_steps": done, "peak_mem_mib": peak_mib(device),
            "warmup_s": warmup_s}


def syncs_per_step(work, net, x, device, optimizer: str, steps: int = 3) -> float | None:
    """CUDA synchronisations per fp16 step of the bare loop (each one stalls the CPU until the GPU drains)."""
    if device.type != "cuda":
        return None
    opt = (torch.optim.Adam if optimizer == "Adam" else torch.optim.AdamW)(net.parameters(), lr=1e-5)
    scaler = torch.amp.GradScaler("cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = work.loss(net, x)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught) / steps


def compiled_rates(work, net, x, device, optimizer: str, args, flops: int, peak, eager: dict, budget) -> dict:
    """The fp16 loop with `torch.compile(net, mode=m)` per mode: steps/s, MFU, peak memory, compile seconds."""
    out = {}
    for mode in COMPILE_MODES:
        if mode == "reduce-overhead" and device.type != "cuda":
            out[mode] = {"skipped": "CUDA graphs: CUDA only"}
            continue
        if budget() < 60:
            out[mode] = {"skipped": "time budget"}
            continue
        torch._dynamo.reset()
        try:
            compiled = torch.compile(net, mode=mode)
            r = train_rate(work, compiled, x, torch.float16, device, optimizer, args.steps, args.warmup,
                           args.max_seconds, graphs=mode == "reduce-overhead")
        except Exception as err:  # noqa: BLE001  (a mode that fails to compile is a finding, not the end)
            out[mode] = {"error": " ".join(str(err).split())[:300]}
            continue
        finally:
            compiled = None
            torch._dynamo.reset()
        r["compile_s"] = max(r["warmup_s"] - args.warmup * eager["step_s"], 0.0)
        r["mfu"] = flops * r["steps_per_s"] / (peak["fp16"] * 1e12) if peak else None
        r["speedup_vs_eager"] = r["steps_per_s"] / eager["steps_per_s"]
        out[mode] = r
    return out


def check_cell(paper: str, row: str, overrides: list[str], small: list[str], args, device, peak,
               budget=lambda: float("inf"), compile_here: bool = True) -> dict:
    """Compose the cell, build its network at full size (tiny with --small), time it in fp16 and bf16.

    Then (second version) fp16 compiled in each mode and the synchronisations per step.
    """
    if overrides[0].split("=", 1)[1] not in group_options("experiment"):
        overrides = FALLBACK[row]      # a tree from before multihot pretraining became its own train cell
    _, findings, stage, net = stage_net(overrides, small, args, device)
    batch = 2 if args.small else stage.batch
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
    if "syncs" not in args.skip:
        out["syncs_per_step"] = syncs_per_step(stage.work, net, x, device, stage.optimizer)
    del net, x
    return out


def stage_net(overrides: list[str], small: list[str], args, device):
    """(config, findings, first gradient stage, its network on `device`) of a cell, composed and built as the plan does.

    `langrepr.build` composes the cell and builds the network (`Stage.work.build`), without data: the plan's
    runtime kwargs and random inputs of the real shapes stand in for the datamodule.
    """
    cfg, findings = compose_cell(["profile=full", *overrides, *(small if args.small else [])])
    stage = stages(cfg)[0]
    torch.manual_seed(0)
    return cfg, findings, stage, stage.work.build().to(device).train()


def stage_batch(overrides: list[str], small: list[str], args, device):
    """(config, stage, network, one batch of inputs) of a cell as check_cell builds it."""
    cfg, _, stage, net = stage_net(overrides, small, args, device)
    x = stage.work.inputs(2 if args.small else stage.batch, device, torch.Generator().manual_seed(0))
    return cfg, stage, net, x


def compile_cell(overrides: list[str], small: list[str], args, device, peak, eager: dict, budget) -> dict:
    """check_cell's fp16 loop again with the network compiled in each mode (a fresh network per cell)."""
    _, stage, net, x = stage_batch(overrides, small, args, device)
    if eager.get("oom_batches"):
        return {"skipped": "the eager run needed a smaller micro-batch (out of memory)"}
    flops = count_flops(stage.work, net, x, torch.float16, device)
    return compiled_rates(stage.work, net, x, device, stage.optimizer, args, flops, peak, eager["fp16"], budget)


def train_overrides(overrides: list[str], small: list[str], args, steps: int, folder: Path) -> list[str]:
    """`langrepr.train` arguments for `steps` optimiser steps of the cell, validation, test and best-checkpoint off."""
    cpu = ["trainer.accelerator=cpu", "trainer.precision=32-true"] if args.device == "cpu" else []
    return ["profile=full", *overrides, *(small if args.small else []), *cpu, f"trainer.max_steps={steps}",
            "trainer.limit_val_batches=0", "trainer.limit_test_batches=0", "trainer.num_sanity_val_steps=0",
            "~callbacks.checkpoint", "~callbacks.progress", "test_ckpt=last", "force=true", "hydra.mode=RUN",
            f"hydra.run.dir={folder}", "logger=csv"]   # the data cache stays the checkout's: built once, reused


def lightning_rate(overrides: list[str], small: list[str], args, mode: str | None) -> dict:
    """Steps/s of the product's own loop: `python -m langrepr.train` for k1 and k2 steps, (k2 - k1) / (t2 - t1).

    Differencing two runs cancels start-up, data loading and compilation; `compile=<mode>` is passed only when
    the composed config has the key.
    """
    k1, k2 = (3, 23) if args.small else (50, 550)
    times, root = {}, Path(tempfile.mkdtemp(prefix="gpu_check_loop_"))
    try:
        for k in (k1, k2, k1):   # k1 twice when the first run built the data cache (it was the slower one)
            if k in times and times[k] < times[k2]:
                break
            cmd = [sys.executable, "-m", "langrepr.train", *train_overrides(overrides, small, args, k, root / f"k{k}"),
                   *([f"compile={mode}"] if mode else [])]
            began = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            times[k] = min(times.get(k, float("inf")), time.perf_counter() - began)
            if proc.returncode != 0:
                lines = [x for x in proc.stderr.splitlines() if x.strip()]
                return {"error": " ".join((lines[-1] if lines else f"exit {proc.returncode}").split())[:300]}
            record = json.loads((root / f"k{k}" / "metrics.json").read_text())
            if record.get("steps") not in (None, k):
                return {"error": f"ran {record.get('steps')} steps, not {k}"}
    except subprocess.TimeoutExpired:
        return {"error": "a run passed 240 s"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if times[k2] <= times[k1]:
        return {"error": f"{k2} steps took no longer than {k1} ({times[k2]:.1f} s vs {times[k1]:.1f} s): too noisy here"}
    rate = (k2 - k1) / (times[k2] - times[k1])
    return {"steps": [k1, k2], "wall_s": [times[k1], times[k2]], "steps_per_s": rate,
            "startup_s": times[k1] - k1 / rate}


def packing(args, budget) -> dict:
    """Aggregate steps/s of 1/2/4/8 copies of the loop cell's bare fp16 loop, each its own process, on one device.

    The copies warm up, then start timing together (a file barrier) for --pack-seconds.
    """
    copies = [1, 2] if args.small else PACK_COPIES
    result = {"cell": CELLS[LOOP_CELL][2], "seconds": args.pack_seconds, "points": []}
    for n in copies:
        if budget() < 20 + 3 * args.pack_seconds:
            result["points"].append({"copies": n, "skipped": "time budget"})
            continue
        gate = Path(tempfile.mkdtemp(prefix="gpu_check_pack_"))
        cmd = [sys.executable, __file__, "--pack-worker", str(gate), "--device", args.device,
               "--pack-seconds", str(args.pack_seconds), *(["--small"] if args.small else [])]
        procs = [subprocess.Popen([*cmd, "--worker-id", str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for i in range(n)]
        deadline = time.perf_counter() + 120
        while (len(list(gate.glob("ready_*"))) < n and time.perf_counter() < deadline
               and all(p.poll() is None for p in procs)):
            time.sleep(0.05)
        (gate / "go").touch()
        rates, errors = [], []
        for p in procs:
            out, err = p.communicate(timeout=60 + 2 * args.pack_seconds)
            line = out.strip().splitlines()[-1] if out.strip() else ""
            if p.returncode == 0 and line.startswith("{"):
                rates.append(json.loads(line)["steps_per_s"])
            else:
                errors.append(" ".join((err.strip().splitlines() or [f"exit {p.returncode}"])[-1].split())[:200])
        shutil.rmtree(gate, ignore_errors=True)
        point = {"copies": n, "per_copy_steps_per_s": rates, "aggregate_steps_per_s": sum(rates) if rates else None}
        if errors:
            point["errors"] = errors
        result["points"].append(point)
    one = next((p["aggregate_steps_per_s"] for p in result["points"] if p.get("aggregate_steps_per_s")), None)
    for p in result["points"]:
        if one and p.get("aggregate_steps_per_s"):
            p["vs_one"] = p["aggregate_steps_per_s"] / one
    return result


def pack_worker(args) -> None:
    """One copy of `packing`: warm up, say ready, wait for the gate, time the loop, print one JSON line."""
    device = torch.device(args.device)
    _, row, overrides, small = CELLS[LOOP_CELL]
    _, stage, net, x = stage_batch(overrides, small, args, device)
    gate = Path(args.pack_worker)
    r = train_rate(stage.work, net, x, torch.float16 if device.type == "cuda" else torch.float32, device,
                   stage.optimizer, steps=10**9, warmup=args.warmup, max_s=args.pack_seconds,
                   ready=lambda: ((gate / f"ready_{args.worker_id}").touch(), wait_for(gate / "go")))
    print(json.dumps({"steps_per_s": r["steps_per_s"], "timed_steps": r["timed_steps"]}), flush=True)


def wait_for(path: Path, timeout: float = 180) -> None:
    deadline = time.perf_counter() + timeout
    while not path.exists() and time.perf_counter() < deadline:
        time.sleep(0.02)


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
    parser.add_argument("--budget-s", type=float, default=TIME_BUDGET_S,
                        help="seconds after which the remaining parts are recorded as skipped")
    parser.add_argument("--skip", default="", help=f"comma-separated parts to leave out: {', '.join(PARTS)}")
    parser.add_argument("--pack-seconds", type=float, default=8.0, help="timed seconds of each packing point")
    parser.add_argument("--pack-worker", help=argparse.SUPPRESS)   # one copy of the packing measurement
    parser.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.skip = {part for part in args.skip.split(",") if part}
    if args.skip - set(PARTS):
        raise SystemExit(f"error: --skip takes {', '.join(PARTS)}; not {', '.join(sorted(args.skip - set(PARTS)))}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here: run on a GPU machine, or pass --device cpu --small")
    if args.small:
        args.steps, args.warmup, args.attention_width, args.attention_repeats = 2, 1, 32, 2
        args.pack_seconds = min(args.pack_seconds, 1.0)
    if args.pack_worker:
        pack_worker(args)
        return
    device = torch.device(args.device)
    began = time.perf_counter()

    def budget() -> float:
        return args.budget_s - (time.perf_counter() - began)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    peak = peak_for(name) if device.type == "cuda" else None
    record = {"name": "gpu_check", "device": str(device), "device_name": name, "small": args.small,
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "peak_tflops": peak, "peak_source": PEAK_SOURCE if peak else "no peak known for this device: MFU null",
              "method": "batch = the cell's (2 with --small), halved on out-of-memory; autocast fp16 + GradScaler and "
                        "bf16; AdamW (Adam where the cell uses it); FLOPs per step by FlopCounterMode on the real "
                        "shapes; MFU = FLOPs per step x steps/s / peak",
              "version": 2, "skipped_parts": sorted(args.skip),
              "method_v2": "compile: the fp16 loop with torch.compile(net, mode), compile_s = warm-up time minus "
                           f"{args.warmup} eager steps; syncs_per_step: torch.cuda.set_sync_debug_mode('warn') "
                           "warnings per fp16 step (null off CUDA); loop: python -m langrepr.train for k1 and k2 "
                           "steps (validation, test and best checkpoint off), (k2-k1)/(t2-t1); packing: copies of "
                           "the bare fp16 loop in separate processes timed together",
              "papers": {}}

    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "device"
    out = Path(args.out) / f"gpu_check_{'small_' if args.small else ''}{slug}.json"

    def save() -> None:
        """Written after every part: a run stopped from outside (a device call's limit) keeps what it measured."""
        record["wall_s"] = time.perf_counter() - began
        write_json_atomic(out, record)
    for paper, row, overrides, small in CELLS:
        print(f"{paper}/{row} ...", flush=True)
        try:
            result = check_cell(paper, row, overrides, small, args, device, peak)
        except Exception as err:  # noqa: BLE001  (one cell failing must not cost the other measurements)
            result = {"cell": overrides, "error": " ".join(str(err).split())[:400]}
        record["papers"].setdefault(paper, {})[row] = result
        save()
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
        if budget() < 0:
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
    save()
    def compile_row(paper: str, row: str, overrides: list[str], small: list[str]) -> None:
        result = record["papers"][paper][row]
        if "compile" in args.skip:
            result["compile"] = {"skipped": "--skip compile"}
        elif "fp16" not in result:
            result["compile"] = {"skipped": "no eager measurement"}
        elif args.small and row != CELLS[LOOP_CELL][1]:
            result["compile"] = {"skipped": "--small: compiled on TensorCoder's PTB cell only (CPU compiles are slow)"}
        elif budget() < 60:
            result["compile"] = {mode: {"skipped": "time budget"} for mode in COMPILE_MODES}
        else:
            print(f"{paper}/{row} compiled ...", flush=True)
            try:
                result["compile"] = compile_cell(overrides, small, args, device, peak, result, budget)
            except Exception as err:  # noqa: BLE001
                result["compile"] = {"error": " ".join(str(err).split())[:300]}
            print(f"  {result['compile']}", flush=True)
        save()

    compile_row(*CELLS[LOOP_CELL])                 # first TensorCoder's PTB cell: what the one-call column runs
    tc = record["papers"]["tensorcoder"][CELLS[LOOP_CELL][1]]
    loop_overrides, loop_small = CELLS[LOOP_CELL][2], CELLS[LOOP_CELL][3]
    has_compile = "compile" in compose_cell(["profile=full", *loop_overrides])[0]   # the `compile` switch (gpustep)
    if "loop" in args.skip:
        record["loop"] = {"skipped": "--skip loop"}
    else:
        print("loop: langrepr.train vs the bare loop ...", flush=True)
        lightning = (lightning_rate(loop_overrides, loop_small, args, "none" if has_compile else None)
                     if budget() > 60 else {"skipped": "time budget"})
        bare = tc.get("fp16", {}).get("steps_per_s")
        record["loop"] = {"cell": loop_overrides, "compile_key_in_config": has_compile,
                          "bare_fp16_steps_per_s": bare, "lightning": {"eager": lightning},
                          "lightning_vs_bare": lightning["steps_per_s"] / bare if bare and "steps_per_s" in lightning
                          else None}
        print(f"  {lightning}", flush=True)
        save()
    if "packing" in args.skip:
        record["packing"] = {"skipped": "--skip packing"}
    else:
        print("packing ...", flush=True)
        record["packing"] = packing(args, budget)
        for point in record["packing"]["points"]:
            print(f"  {point}", flush=True)
        save()
    if "loop" not in args.skip and has_compile:
        for mode in COMPILE_MODES:
            if budget() < 90:
                record["loop"]["lightning"][mode] = {"skipped": "time budget"}
            else:
                record["loop"]["lightning"][mode] = lightning_rate(loop_overrides, loop_small, args, mode)
    elif "loop" not in args.skip:
        for mode in COMPILE_MODES:
            record["loop"]["lightning"][mode] = {"skipped": "this checkout's config has no `compile` key"}
    for paper, row, overrides, small in CELLS:     # compile last: the slowest part
        if row != CELLS[LOOP_CELL][1]:
            compile_row(paper, row, overrides, small)
    save()
    print(f"wrote {out} ({record['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
