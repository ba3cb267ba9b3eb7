"""Table 1 cell (multi-hot LM §2.3): the three token lists' sizes and how each covers the analysed corpus.

A pipeline cell: analysis and list building are cached (`langrepr.data.korean.prepare`), no model, no training.
"""

from __future__ import annotations

import time
from pathlib import Path

from langrepr.data.korean.encoding import MorphemeEncoder, coverage
from langrepr.data.korean.prepare import analysed_corpus, token_lists


def table1_pipeline(output_dir: str, corpus: dict, sizes: dict, cache_dir: str, workers: int = 2,
                    max_group: int = 16) -> dict[str, float]:
    """Sizes and syllable counts of the three lists, and how each covers the corpus (flat metrics)."""
    started = time.time()
    _, analysed = analysed_corpus(corpus, cache_dir, workers)
    analysed_s = time.time() - started
    lists = token_lists(corpus, sizes, cache_dir, workers)
    metrics: dict[str, float] = {"corpus/sentences": len(analysed),
                                 "corpus/morphemes": sum(len(s) for s in analysed), "time/analysis_s": analysed_s}
    for kind, token_list in lists.items():
        token_list.save(Path(output_dir) / "token_lists" / f"{kind}.json")   # the run's own copy
        metrics[f"{kind}/all_tokens"] = len(token_list.tokens)
        metrics[f"{kind}/syllable_tokens"] = token_list.syllable_count
        for key, value in coverage(MorphemeEncoder(token_list, max_group), analysed).items():
            metrics[f"{kind}/{key}"] = value
    metrics["time/total_s"] = time.time() - started
    return metrics
