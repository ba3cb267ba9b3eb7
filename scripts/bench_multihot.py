"""Benchmark the multi-hot LM's two costs (multi-hot LM §2.1-2.2).

1. Morpheme analysis throughput: sentences/s of kiwipiepy over real Korean text (the quick corpus's NSMC reviews
   when LANGREPR_DATA_DIR is set, else generated sentences) with 1 and 2 worker processes (model load excluded).
2. Loss cost: forward+backward time of the multi-hot softmax CE (eqs. 5-7) and of BCE over plain cross-entropy at
   vocabulary 20,000, with multi-hot groups (M masked positions, G slots). Target for multi-hot SCE: <= 1.3x.

Writes outputs/bench/multihot.json as [{"name", "value" | "ratio", "target", "details"}]. ~1-2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from langrepr.benchmarking import write_bench
from langrepr.models.multihot_losses import binary_ce, multi_hot_softmax_ce, softmax_ce
from langrepr.utils import PROJECT_ROOT

FALLBACK = ["아르키메데스는 스테이케이션이 유행이라고 말했다.", "영화가 정말 재미있었고 음악도 좋았다.",
            "서울지방검찰청 공안부는 사전구속영장을 발부받았다."]


def sentences(n: int) -> tuple[list[str], str]:
    data_dir = os.environ.get("LANGREPR_DATA_DIR")
    if data_dir and os.path.exists(os.path.join(data_dir, "nsmc")):
        from langrepr.data.korean.corpus import nsmc_neutral_reviews

        return nsmc_neutral_reviews(data_dir, n), "NSMC raw reviews rated 5-8"
    return (FALLBACK * (n // len(FALLBACK) + 1))[:n], "generated sentences (LANGREPR_DATA_DIR not set)"


def analysis_throughput(n: int) -> list[dict]:
    from langrepr.data.korean.morphemes import _init_worker, analyse

    text, source = sentences(n)
    _init_worker()                         # model load is a one-off, not throughput
    analyse(text[:8], workers=1)           # Kiwi loads parts of its model on the first call
    rows = []
    for workers in (1, 2):
        start = time.perf_counter()
        analyse(text, workers=workers, chunk_size=128)
        rate = len(text) / (time.perf_counter() - start)
        rows.append({"name": f"analysis_sentences_per_s_{workers}_workers", "value": rate, "target": None,
                     "details": {"sentences": len(text), "source": source}})
    return rows


def time_loss(fn, logits, ids, mask, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        x = logits.detach().requires_grad_()
        start = time.perf_counter()
        fn(x, ids, mask).backward()
        times.append(time.perf_counter() - start)
    return min(times)          # other load on a shared machine only ever adds time


def loss_ratios(vocab: int, positions: int, group: int, repeats: int) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(positions, vocab, generator=gen)
    ids = torch.randint(5, vocab, (positions, group), generator=gen)
    sizes = torch.where(torch.rand(positions, generator=gen) < 0.8, 1,
                        torch.randint(2, group + 1, (positions,), generator=gen))
    mask = torch.arange(group) < sizes[:, None]            # 80% single tokens, 20% groups of 2..G
    plain = time_loss(lambda x, i, m: F.cross_entropy(x, i[:, 0]), logits, ids, mask, repeats)
    rows = []
    for name, fn in (("mhsce", multi_hot_softmax_ce), ("sce_multihot", softmax_ce), ("bce", binary_ce)):
        t = time_loss(fn, logits, ids, mask, repeats)
        rows.append({"name": f"loss_time_over_plain_ce_{name}", "ratio": t / plain,
                     "target": 1.3 if name == "mhsce" else None,
                     "details": {"vocab": vocab, "positions": positions, "group_slots": group,
                                 "plain_ce_ms": plain * 1e3, "loss_ms": t * 1e3}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--vocab", type=int, default=20000)
    parser.add_argument("--positions", type=int, default=1024, help="masked positions per batch")
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the loss timing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)    # one thread: ratios on a shared CPU are not blurred by oversubscription
    rows = loss_ratios(args.vocab, args.positions, args.group, args.repeats) + analysis_throughput(args.sentences)
    for row in rows:
        value = row.get("ratio", row.get("value"))
        target = f" (target <= {row['target']})" if row["target"] else ""
        print(f"{row['name']}: {value:.2f}{target}")
    write_bench(PROJECT_ROOT / "outputs" / "bench" / "multihot.json", rows)


if __name__ == "__main__":
    main()
