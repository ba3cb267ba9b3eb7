"""The three token lists of Table 1, built from an analysed corpus (`(form, tag)` morphemes per sentence).

- `bpe_base`: BPE (`tokenizers`) over morphemes, each morpheme a pre-tokenised word, plus `form/TAG` tokens
  for the most frequent morphemes ("morphemes alone or morphemes combined with parts-of-speech").
- `bpe_syllable`: `bpe_base` with Latin letters, digits, Hanja and POS-joined tokens dropped, the BPE
  continuation marker stripped, duplicates removed, and the `@`-syllable tokens added.
- `dict_syllable`: the most frequent nouns, predicates and adverbs of the analyser's own dictionary (no
  multi-word compound nouns), plus the `@`-syllable tokens.

A list is saved as JSON with the analyser that built it; loading it under another analyser is an error.
[inferred, configurable]: the split of the BPE base between BPE merges and POS-joined tokens (`pos_joined`);
the syllable tokens are the most frequent characters of the corpus (any script).
"""

from __future__ import annotations

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
    """BPE merges over morpheme forms with `tokenizers`; continuation pieces carry `##` (as WordPiece does)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix=CONTINUATION))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS),
                                  continuing_subword_prefix=CONTINUATION, show_progress=False)
    tokenizer.train_from_iterator((" ".join(f for f, _ in s) for s in analysed), trainer=trainer)
    vocab = tokenizer.get_vocab()
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in SPECIALS]


def bpe_base(analysed: Sequence[list[Morpheme]], bpe_size: int, pos_joined: int) -> TokenList:
    pieces = train_bpe(analysed, bpe_size)
    joined = [f"{form}/{tag}" for (form, tag), _ in morpheme_counts(analysed).most_common()
              if " " not in form][:pos_joined]
    tokens = list(dict.fromkeys([*SPECIALS, *pieces, *joined]))
    return TokenList("bpe_base", tokens, analyser_name(), {"bpe_pieces": len(pieces), "pos_joined": len(joined)})


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
