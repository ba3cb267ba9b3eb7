"""Corpus → analysis → token lists, cached (the Table 1 cell that reports them: `langrepr.pipelines.multihot.token_lists`)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from langrepr.data.korean.corpus import build_corpus
from langrepr.data.korean.morphemes import Morpheme, analyser_name, cached_analysis, corpus_key
from langrepr.data.korean.token_lists import BPE_TRAINER, KINDS, TokenList, build_all

log = logging.getLogger(__name__)


def corpus_sentences(corpus: dict) -> tuple[str, list[str]]:
    """(name, sentences) of the configured corpus."""
    corpus = dict(corpus)
    name = corpus.pop("name", "corpus")
    return name, build_corpus(**corpus)


def corpus_content_key(corpus: dict) -> str:
    """The corpus as its content: name, analyser and sha256 of its sentences (the key of every cache built on it)."""
    return corpus_key(*corpus_sentences(corpus))


def analysed_corpus(corpus: dict, cache_dir: str, workers: int = 2) -> tuple[str, list[list[Morpheme]]]:
    """Sentences of the configured corpus, analysed (cached); returns (cache name, analysis)."""
    name, sentences = corpus_sentences(corpus)
    return name, cached_analysis(name, sentences, cache_dir, workers=workers)


def list_key(sentences_key: str, sizes: dict) -> str:
    """Cache key of the token lists: the corpus *content* and the sizes.

    `sentences_key` is `corpus_key` (name, analyser, sha256 of the sentences), so a changed corpus file never
    gets the old corpus's lists.
    """
    blob = json.dumps({"sentences": sentences_key, "sizes": sizes, "analyser": analyser_name()}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def token_lists(corpus: dict, sizes: dict, cache_dir: str, workers: int = 2) -> dict[str, TokenList]:
    """The three lists for this corpus and these sizes: read from the cache, else analysed and built."""
    name, sentences = corpus_sentences(corpus)
    folder = Path(cache_dir) / "korean_token_lists" / list_key(corpus_key(name, sentences), sizes)
    if all((folder / f"{k}.json").exists() for k in KINDS):
        lists = {k: TokenList.load(folder / f"{k}.json") for k in KINDS}
        if lists["bpe_base"].meta.get("bpe_trainer") != BPE_TRAINER:   # kept: models may have been trained on them
            log.warning("token lists %s were built by tokenizers' BPE trainer, whose lists varied from run to run; "
                        "delete that folder to rebuild them deterministically (and re-run what was trained on them)",
                        folder)
        return lists
    analysed = cached_analysis(name, sentences, cache_dir, workers=workers)
    lists = build_all(analysed, **sizes)
    for kind, token_list in lists.items():
        token_list.save(folder / f"{kind}.json")
    return lists

