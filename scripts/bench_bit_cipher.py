"""Benchmark Bit Cipher co-occurrence training (issue target: >= 1M tokens/s on 2 cores at b = 128, r = 8).

Throughput of `cooccurrence_matrix` (Sum and Cat left_right) over pre-tokenised shards of a Zipf token stream
(p(rank k) ∝ 1/k^1.1 over the V words, renormalised: English-like; clipping an unbounded Zipf draw at V instead
would pile a third of the tokens onto one word) cut into 25-token documents; tokenisation excluded, as the target
says. The context table is the noised cipher of that stream (b = 128, β = f/(f+1)) passed as the pipeline passes
it (`context_table`: sparse codes + rank-one noise); `--table dense` passes its dense rows instead (the generic
path, and the only one code before the factored product knew). Each configuration runs in its own process (fresh
peak-RSS counters) with `workers` pool processes. Tokens per CPU-second (driver + pool workers) is printed beside
the wall-clock rate because on a shared machine other load only ever lowers the latter; the 1-minute load average
before and after each configuration is recorded. Peak memory is the largest resident set of the driver and of
any worker, beside the size of one dense (V+1) × D float64 accumulator, for several vocabulary sizes. Wall time
includes the pool start and the merge of the partials.

Writes outputs/bench/bit_cipher.json as {"name", "value", "target", "details"}. ~1-3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from langrepr.benchmarking import write_bench
from langrepr.utils import PROJECT_ROOT


def write_shards(folder: Path, vocab: int, tokens: int, shard_tokens: int, seed: int = 0) -> None:
    """Shards in the layout `langrepr.pipelines.bitcipher.corpus_shards` writes (words, ids, doc_offsets, counts)."""
    from langrepr.pipelines.bitcipher.corpus_shards import save_npz_atomic

    rng = np.random.default_rng(seed)
    probs = 1.0 / np.arange(1, vocab + 1) ** 1.1
    probs /= probs.sum()
    words = np.array([f"w{i}" for i in range(vocab)], dtype=object)
    for k, start in enumerate(range(0, tokens, shard_tokens)):
        n = min(shard_tokens, tokens - start)
        ids = rng.choice(vocab, size=n, p=probs).astype(np.int32)
        offsets = np.r_[np.arange(0, n, 25), n].astype(np.int64)
        save_npz_atomic(folder / "shards" / f"{k:05d}.npz", {
            "words": words, "ids": ids, "doc_offsets": offsets,
            "counts": np.bincount(ids, minlength=vocab).astype(np.int64),
            "doc_counts": np.zeros(vocab, dtype=np.int64)})


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished pool workers."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cipher_table(vocab: int, bits: int, table: str):
    """The noised cipher of the bench stream's words (counts ∝ the Zipf probabilities), as the pipeline passes it."""
    from langrepr.models.bit_cipher import build_cipher

    probs = 1.0 / np.arange(1, vocab + 1) ** 1.1
    counts = {f"w{i}": int(c) + 1 for i, c in enumerate(probs / probs.sum() * 1e7)}
    cipher = build_cipher(counts, bits, "freq")
    if table == "dense":
        return cipher.vectors
    from langrepr.pipelines.bitcipher.cooccurrence import context_table

    return context_table(cipher)


def one(mode: str, vocab: int, tokens: int, bits: int, radius: int, workers: int, shard_tokens: int,
        table: str = "factored") -> dict:
    from langrepr.pipelines.bitcipher.cooccurrence import cooccurrence_matrix

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_shards(folder, vocab, tokens, shard_tokens)
        context = cipher_table(vocab, bits, table)
        index = {f"w{i}": i for i in range(vocab)}
        load_before = os.getloadavg()[0]
        cpu_before = cpu_seconds()
        start = time.perf_counter()
        matrix = cooccurrence_matrix(folder, context, index, folder / "work", mode=mode, radius=radius,
                                     workers=workers)
        seconds = time.perf_counter() - start
        cpu = cpu_seconds() - cpu_before
    kib = 1024
    return {"mode": mode, "vocab": vocab, "tokens": tokens, "bits": bits, "radius": radius, "workers": workers,
            "table": table, "seconds": seconds, "tokens_per_s": tokens / seconds, "cpu_seconds": cpu,
            "tokens_per_cpu_s": tokens / cpu, "load_avg_1min_before": load_before,
            "load_avg_1min_after": os.getloadavg()[0], "cpu_count": os.cpu_count(),
            "peak_rss_driver_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kib,
            "peak_rss_worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / kib,
            "accumulator_mib": matrix.nbytes / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=8, metavar=("MODE", "V", "T", "B", "R", "W", "S", "TABLE"), help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, default=4_000_000)
    parser.add_argument("--shard-tokens", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--table", choices=("factored", "dense"), default="factored",
                        help="context table as the pipeline passes it (factored) or its dense rows")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "outputs" / "bench" / "bit_cipher.json")
    args = parser.parse_args()
    if args.one:
        mode, *nums, table = args.one
        print(json.dumps(one(mode, *map(int, nums), table=table)))
        return
    rows = []
    for vocab in args.vocab_sizes:
        for mode in ("sum", "cat"):
            cmd = [sys.executable, __file__, "--one", mode, str(vocab), str(args.tokens), "128", "8",
                   str(args.workers), str(args.shard_tokens), args.table]
            result = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            rows.append(result)
            print(f"{mode:3s} V={vocab:>7,d} b=128 r=8 workers={args.workers}: {result['tokens_per_s']:>12,.0f} "
                  f"tokens/s ({result['tokens_per_cpu_s']:,.0f} per CPU-second)  peak RSS driver {result['peak_rss_driver_mib']:.0f} MiB, worker "
                  f"{result['peak_rss_worker_mib']:.0f} MiB (accumulator {result['accumulator_mib']:.0f} MiB)")
    best = {m: max(r["tokens_per_s"] for r in rows if r["mode"] == m) for m in ("sum", "cat")}
    payload = [{"name": f"bit_cipher_{m}_tokens_per_s", "value": best[m], "target": 1_000_000,
                "details": [r for r in rows if r["mode"] == m]} for m in ("sum", "cat")]
    write_bench(args.out, payload)
    print(f"best tokens/s: Sum {best['sum']:,.0f}, Cat {best['cat']:,.0f} (target 1,000,000 on 2 cores)")


if __name__ == "__main__":
    main()
