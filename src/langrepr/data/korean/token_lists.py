"""The three token lists of Table 1, built from an analysed corpus (`(form, tag)` morphemes per sentence).

- `bpe_base`: BPE (`train_bpe`, deterministic) over morphemes, each morpheme a pre-tokenised word, plus
  `form/TAG` tokens for the most frequent morphemes ("morphemes alone or morphemes combined with parts-of-speech").
- `bpe_syllable`: `bpe_base` with Latin letters, digits, Hanja and POS-joined tokens dropped, the BPE
  continuation marker stripped, duplicates removed, and the `@`-syllable tokens added.
- `dict_syllable`: the most frequent nouns, predicates and adverbs of the analyser's own dictionary (no
  multi-word compound nouns), plus the `@`-syllable tokens.

A list is a function of the corpus and the sizes alone: the same input gives the same list, byte for byte, in any
process (ties are broken by ids or by first occurrence, never by hash order). A list is saved as JSON with the
analyser that built it; loading it under another analyser is an error.
[inferred, configurable]: the split of the BPE base between BPE merges and POS-joined tokens (`pos_joined`);
the syllable tokens are the most frequent characters of the corpus (any script).
"""

from __future__ import annotations

import heapq
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langrepr.data.korean.morphemes import Morpheme, analyser_name, dictionary_entries
from langrepr.errors import UserError
from langrepr.utils import write_json_atomic

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = range(len(SPECIALS))
SYLLABLE_PREFIX = "@"
CONTINUATION = "##"
FOREIGN = re.compile(r"[A-Za-z0-9\u2E80-\u2FDF\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF]")  # Latin, digits, Hanja
DICTIONARY_TAGS = ("NNG", "NNP", "VV", "VA", "MAG")   # nouns, predicates, adverbs
KINDS = ("bpe_base", "bpe_syllable", "dict_syllable")
BPE_TRAINER = "train_bpe 1"   # in a list's meta; lists cached before it came from tokenizers' run-to-run-varying one


@dataclass
class TokenList:
    """An ordered token list (ids = positions) and what it was built with."""

    kind: str
    tokens: list[str]
    analyser: str
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @property
    def syllable_count(self) -> int:
        return sum(t.startswith(SYLLABLE_PREFIX) and len(t) == 2 for t in self.tokens)

    @property
    def multi_hot(self) -> bool:
        return self.kind != "bpe_base"

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, {"kind": self.kind, "analyser": self.analyser, "meta": self.meta,
                                 "tokens": self.tokens})

    @classmethod
    def load(cls, path: str | Path) -> TokenList:
        path = Path(path)
        if not path.exists():
            raise UserError(f"token list {path} does not exist: build it first (stage: pipeline, "
                            "langrepr.data.korean.token_lists.build_token_lists)")
        payload = json.loads(path.read_text())
        if payload.get("analyser") != analyser_name():
            raise UserError(f"token list {path} was built with {payload.get('analyser')!r}, this run analyses "
                            f"with {analyser_name()!r}: rebuild the list (delete it) or install that analyser")
        return cls(payload["kind"], payload["tokens"], payload["analyser"], payload.get("meta", {}))


def morpheme_counts(analysed: Sequence[list[Morpheme]]) -> Counter:
    return Counter(m for sentence in analysed for m in sentence)


def syllable_tokens(analysed: Sequence[list[Morpheme]], size: int) -> list[str]:
    """`@`+character for the `size` most frequent characters of the morphemes (ties broken by character)."""
    chars = Counter(c for sentence in analysed for form, _ in sentence for c in form if not c.isspace())
    ranked = sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
    return [SYLLABLE_PREFIX + c for c, _ in ranked]


def train_bpe(analysed: Sequence[list[Morpheme]], vocab_size: int, min_frequency: int = 2) -> list[str]:
    """BPE merges over morpheme forms; continuation pieces carry `##` (as WordPiece does). Deterministic.

    Ids: the characters (by code point), their `##` continuation forms (by code point), then one token per merge
    in merge order. Each step merges the most frequent adjacent pair, ties going to the pair of lower ids (as
    `tokenizers` does), until the vocabulary with the specials holds `vocab_size` tokens or no pair occurs
    `min_frequency` times.

    Why not `tokenizers`' BpeTrainer: it numbers the `##` pieces while iterating a Rust HashMap seeded at random
    in every process (no setting or environment variable fixes the seed), so its equal-count ties fell differently
    from run to run and the same corpus gave other lists (issue 33: 9,989 / 9,988 BPE base tokens).
    """
    words = Counter(w for sentence in analysed for form, _ in sentence for w in form.split())
    chars = sorted({c for w in words for c in w})
    vocab = list(dict.fromkeys([*chars, *sorted({CONTINUATION + c for w in words for c in w[1:]})]))
    ids = {t: i for i, t in enumerate(vocab)}
    seqs = [[ids[w[0]], *(ids[CONTINUATION + c] for c in w[1:])] for w in words]
    counts = list(words.values())
    pair_counts: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for i, (seq, n) in enumerate(zip(seqs, counts)):
        for pair in zip(seq, seq[1:]):
            pair_counts[pair] += n
            where.setdefault(pair, set()).add(i)
    heap = [(-n, pair) for pair, n in pair_counts.items()]   # an entry whose count went stale is skipped
    heapq.heapify(heap)
    while heap and len(SPECIALS) + len(vocab) < vocab_size:
        neg, pair = heapq.heappop(heap)
        if -neg != pair_counts[pair]:
            continue            # stale: every change of a pair's count pushed a fresh entry
        if -neg < min_frequency:
            break
        token = vocab[pair[0]] + vocab[pair[1]].removeprefix(CONTINUATION)
        if token not in ids:
            ids[token] = len(vocab)
            vocab.append(token)
        changed = set()
        for i in sorted(where.pop(pair)):
            seq, n = seqs[i], counts[i]
            merged = _merge(seq, pair, ids[token])
            if len(merged) == len(seq):
                continue        # the pair left this word through an earlier merge
            for old in zip(seq, seq[1:]):
                pair_counts[old] -= n
                changed.add(old)
            for fresh in zip(merged, merged[1:]):
                pair_counts[fresh] += n
                where.setdefault(fresh, set()).add(i)
                changed.add(fresh)
            seqs[i] = merged
        for other in sorted(changed):
            if pair_counts[other] > 0:
                heapq.heappush(heap, (-pair_counts[other], other))
    return vocab


def _merge(seq: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """`seq` with every non-overlapping occurrence of `pair` (scanned left to right) replaced by `new`."""
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def bpe_base(analysed: Sequence[list[Morpheme]], bpe_size: int, pos_joined: int) -> TokenList:
    pieces = train_bpe(analysed, bpe_size)
    joined = [f"{form}/{tag}" for (form, tag), _ in morpheme_counts(analysed).most_common()
              if " " not in form][:pos_joined]
    tokens = list(dict.fromkeys([*SPECIALS, *pieces, *joined]))
    return TokenList("bpe_base", tokens, analyser_name(),
                     {"bpe_pieces": len(pieces), "pos_joined": len(joined), "bpe_trainer": BPE_TRAINER})


def bpe_syllable(base: TokenList, syllables: list[str]) -> TokenList:
    kept = []
    for token in base.tokens[len(SPECIALS):]:
        if "/" in token[1:] or FOREIGN.search(token):   # POS-joined or Latin/digit/Hanja
            continue
        kept.append(token.removeprefix(CONTINUATION))
    tokens = list(dict.fromkeys([*SPECIALS, *(t for t in kept if t), *syllables]))
    return TokenList("bpe_syllable", tokens, base.analyser, {"from_base": len(set(kept)), "syllables": len(syllables)})


def dict_syllable(analysed: Sequence[list[Morpheme]], size: int, syllables: list[str],
                  tags: Sequence[str] = DICTIONARY_TAGS) -> TokenList:
    """The `size` most corpus-frequent dictionary words with `tags` (a form appears once), plus syllables."""
    dictionary = dictionary_entries(tuple(tags))
    ranked = [form for (form, tag), _ in morpheme_counts(analysed).most_common() if (form, tag) in dictionary]
    words = list(dict.fromkeys(ranked))[:size]
    tokens = list(dict.fromkeys([*SPECIALS, *words, *syllables]))
    return TokenList("dict_syllable", tokens, analyser_name(),
                     {"dictionary_words": len(words), "dictionary_entries": len(dictionary), "syllables": len(syllables)})


def build_all(analysed: Sequence[list[Morpheme]], bpe_size: int, pos_joined: int, syllables: int,
              dictionary_size: int) -> dict[str, TokenList]:
    syl = syllable_tokens(analysed, syllables)
    base = bpe_base(analysed, bpe_size, pos_joined)
    return {"bpe_base": base, "bpe_syllable": bpe_syllable(base, syl),
            "dict_syllable": dict_syllable(analysed, dictionary_size, syl)}
