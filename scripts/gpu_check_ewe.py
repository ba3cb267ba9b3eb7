"""GPU check for sessions with a lent GPU: one fp16 train step of each EWE Table 1 model at batch 32 x u=128.

Reports peak memory (must fit 24 GB, as in the paper's RTX TITAN) and samples/s per model, and writes
outputs/bench/ewe_gpu_check.json. `--device cpu --small` runs the same code path as a smoke test.
"""

from __future__ import annotations

import argparse
import time

import torch

from langrepr.benchmarking import build_net, random_batch
from langrepr.tasks.optim import parameter_groups
from langrepr.utils import PROJECT_ROOT, write_json_atomic

MODELS = ["bert_ewe", "bert_orig", "albert_ewe", "albert_orig", "canine_ewe", "canine_orig"]
SMALL = ["model.net.hidden_size=48", "model.net.num_layers=1", "model.net.intermediate_size=64"]


def train_step(net, opt, scaler, batch: dict, device: torch.device, fp16: bool) -> None:
    """Forward in fp16 autocast (as the paper's FP16 mixed precision), scaled backward, AdamW step."""
    with torch.autocast(device.type, dtype=torch.float16, enabled=fp16):
        logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), batch["labels"])
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="tiny widths (a smoke test of this script)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU here: run on a GPU machine, or pass --device cpu --small")
    device = torch.device(args.device)
    fp16 = device.type == "cuda"
    generator = torch.Generator().manual_seed(0)
    results = {}
    for name in MODELS:
        net, shape = build_net(name, SMALL if args.small else [])
        net.to(device).train()
        opt = torch.optim.AdamW(parameter_groups(net, 0.01), lr=2e-5)
        scaler = torch.amp.GradScaler(enabled=fp16)
        batch = {k: v.to(device) for k, v in random_batch(shape, args.batch, 1328, generator).items()}
        if fp16:
            torch.cuda.reset_peak_memory_stats()

        step_args = (net, opt, scaler, batch, device, fp16)
        train_step(*step_args)   # warm-up
        if fp16:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            train_step(*step_args)
        if fp16:
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / args.steps
        peak = torch.cuda.max_memory_allocated() / 2**30 if fp16 else None
        results[name] = {"samples_per_s": args.batch / seconds, "step_s": seconds, "peak_gib": peak,
                         "fits_24gb": None if peak is None else peak < 24}
        print(f"{name:12s} {args.batch / seconds:8.1f} samples/s  peak "
              f"{'n/a (cpu)' if peak is None else f'{peak:.2f} GiB'}")
        del net, opt, step_args
    out = PROJECT_ROOT / "outputs" / "bench" / "ewe_gpu_check.json"
    write_json_atomic(out, {"name": "ewe_gpu_check", "device": str(device), "fp16": fp16, "batch": args.batch,
                            "u": 128, "small": args.small, "results": results,
                            "gpu": torch.cuda.get_device_name() if fp16 else None})
    print(f"wrote {out.relative_to(PROJECT_ROOT)}")


if __name__ == "__main__":
    main()
