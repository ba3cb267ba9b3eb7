"""Tokenizers for the EWE experiments (arXiv 2302.13475), all behind one small interface.

The tokenizer contract every datamodule relies on: `prepare(texts, cache_dir)` trains or loads a vocabulary (no-op for byte and
code-point tokenizers), `encode(texts) -> {"input_ids", "attention_mask"}` with fixed shapes,
`cache_key()` changes whenever the encoding would change, `vocab_size` is the id range a model needs.
A tokenizer that can tag words also has `encode_words(sentences)` (pre-split words -> the same tensors plus
`first`: the position of each word's first piece / material / byte, -1 where the word was cut off), the
alignment a word tagger labels (the first piece of each word carries its tag, the other positions are ignored).

- `WhitespaceByteTokenizer`: EWE main setting (paper §4.2 steps 1-2, Table 3): ids (B, u, v).
- `RawByteTokenizer`: EWE with no tokenizer (Table 5 "None"): ids (B, u, v).
- `SubwordTokenizer`: BERT ORIG WordPiece / ALBERT ORIG Unigram, trained here with `tokenizers`: ids (B, T).
- `CodepointTokenizer`: CANINE ORIG Unicode code points: ids (B, T).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

OVERFLOW = ("truncate", "split")
ALGORITHMS = ("wordpiece", "unigram")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4; [PAD] = 0 = HF pad_token_id


def _check_positive(**values: int) -> None:
    for key, val in values.items():
        if val < 1:
            raise ValueError(f"tokenizer.{key} must be >= 1, got {val}")


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of `text` with NUL removed (byte 0 is the pad); lone surrogates become '?'."""
    return text.replace("\x00", "").encode("utf-8", "replace")


def _utf8_words(text: str, u: int) -> list[bytes]:
    """The first u whitespace-separated words as UTF-8 bytes (maxsplit avoids splitting the rest)."""
    return [w.encode("utf-8", "replace") for w in text.replace("\x00", "").split(maxsplit=u)[:u]]


def _byte_batch(buf: bytearray, batch: int, u: int, v: int) -> dict[str, torch.Tensor]:
    if batch == 0:
        ids = torch.zeros(0, u, v, dtype=torch.long)
    else:
        ids = torch.frombuffer(buf, dtype=torch.uint8).view(batch, u, v).long()  # (B, u, v)
    return {"input_ids": ids, "attention_mask": (ids != 0).any(-1).long()}  # mask: (B, u)


class WhitespaceByteTokenizer:
    """Whitespace-split materials of UTF-8 bytes for elementwise embedding (paper §4.2, METHODS §1.1).

    Rule: NUL characters are removed, the text is split on Unicode whitespace (`str.split()`), and each
    word becomes one material holding its UTF-8 bytes, right-padded with 0 to v bytes. A word longer than v
    bytes is truncated to its first v bytes (overflow="truncate", the paper's implied behaviour; a
    multi-byte character may be cut) or continued in the next material(s) (overflow="split"). The
    sequence is then truncated or right-padded with all-zero materials to u materials. attention_mask is 1
    for a material with any non-zero byte. No [CLS]/[SEP] materials are added (the paper names none),
    so a pooler that reads position 0 reads the first word.

    Example (v=4): "Focus on the elements" -> [F o c u] [o n 0 0] [t h e 0] [e l e m] (truncate).
    """

    def __init__(self, u: int, v: int, overflow: str = "truncate") -> None:
        _check_positive(u=u, v=v)
        if overflow not in OVERFLOW:
            raise ValueError(
                f"tokenizer.overflow={overflow!r} is not supported; allowed values: {', '.join(OVERFLOW)}"
            )
        self.u, self.v, self.overflow = u, v, overflow
        self.vocab_size = 256

    def prepare(self, texts: Iterable[str], cache_dir: Path) -> None:
        """Nothing to train: the vocabulary is the 256 byte values."""

    def cache_key(self) -> str:
        return f"wsbytes-u{self.u}-v{self.v}-{self.overflow}"

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Encode to input_ids (B, u, v) byte ids and attention_mask (B, u)."""
        u, v = self.u, self.v
        buf = bytearray(len(texts) * u * v)
        for b, text in enumerate(texts):
            pos, end = b * u * v, (b + 1) * u * v
            # At most u words are ever needed: each word fills >= 1 material.
            for word in _utf8_words(text, u):
                if self.overflow == "truncate":
                    buf[pos : pos + min(len(word), v)] = word[:v]
                    pos += v
                else:  # split: ceil(len/v) materials, the last one zero-padded
                    take = min(len(word), end - pos)
                    buf[pos : pos + take] = word[:take]
                    pos += -(-take // v) * v
                if pos >= end:
                    break
        return _byte_batch(buf, len(texts), u, v)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict:
        """Pre-split words -> `encode` of the words joined by spaces, plus each word's first material (-1: cut off).

        Each whitespace part of a word is one material (truncate) or ceil(bytes / v) materials (split); a word that
        is only whitespace has no material (-1).
        """
        first = []
        for words in sentences:
            pos, starts = 0, []
            for word in words:
                parts = _utf8_words(word, self.u)
                starts.append(pos if parts and pos < self.u else -1)
                pos += sum(1 if self.overflow == "truncate" else max(1, -(-len(p) // self.v)) for p in parts)
            first.append(starts)
        return {**self.encode([" ".join(words) for words in sentences]), "first": first}


class RawByteTokenizer:
    """No tokenizer (paper §6.2, Table 5 "None"): raw UTF-8 bytes cut into materials of v bytes.

    The byte stream keeps whitespace and is cut into consecutive materials of v bytes. NUL is removed; the stream is truncated to u*v bytes or right-padded
    with 0, so only the last non-empty material can hold padding. attention_mask (B, u) marks materials
    with any non-zero byte.
    """

    def __init__(self, u: int, v: int) -> None:
        _check_positive(u=u, v=v)
        self.u, self.v = u, v
        self.vocab_size = 256

    def prepare(self, texts: Iterable[str], cache_dir: Path) -> None:
        """Nothing to train."""

    def cache_key(self) -> str:
        return f"rawbytes-u{self.u}-v{self.v}"

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Encode to input_ids (B, u, v) and attention_mask (B, u)."""
        n = self.u * self.v
        buf = bytearray(len(texts) * n)
        for b, text in enumerate(texts):
            data = _utf8(text[:n] if "\x00" not in text[:n] else text.replace("\x00", "")[:n])[:n]
            buf[b * n : b * n + len(data)] = data
        return _byte_batch(buf, len(texts), self.u, self.v)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict:
        """Pre-split words joined by one space -> `encode`, plus each word's first byte position (-1: cut off).

        Only materials of one byte align to words (with v > 1 two short words can share a material).
        """
        from langrepr.errors import UserError

        if self.v != 1:
            raise UserError(f"does not compose: raw bytes in materials of v = {self.v} bytes can put two words in "
                            "one position, and a word tagger labels one position per word: use v = 1")
        first = []
        for words in sentences:
            offset, starts = 0, []
            for word in words:
                data = _utf8(word)
                starts.append(offset if data and offset < self.u else -1)
                offset += len(data) + 1                           # the word and the space after it
            first.append(starts)
        return {**self.encode([" ".join(words) for words in sentences]), "first": first}


class SubwordTokenizer:
    """WordPiece (BERT ORIG, 30522) or Unigram (ALBERT ORIG, SentencePiece-like, 30000) trained from scratch.

    `prepare` hashes the training texts (sha256), loads `<cache_key>.json` from cache_dir when present, and
    otherwise trains on the texts and writes it there. Encodings are `[CLS] text [SEP]`, truncated and
    padded with [PAD] (id 0) to max_length.

    Training is deterministic: the same texts give the same file bytes in any process, so a cold cache
    reproduces a warm one. `tokenizers` alone does not: it numbers WordPiece's '##x' pieces in Rust HashMap
    order (random per process) and breaks merge ties by those ids, and it orders Unigram pieces of equal
    score the same way (`_train`). `RECIPE` names this recipe in the cache key, so a vocabulary trained the
    old way is never reused.

    `vocab_size` is the configured size (the model's table size, as in the paper's parameter counts); a
    small corpus may yield fewer pieces (`trained_vocab_size`), all with ids below vocab_size.
    """

    RECIPE = "det1"   # bump when training could give other bytes for the same texts
    SCORE_DECIMALS = 6  # Unigram log-probabilities, rounded (`_canonical`)

    def __init__(self, algorithm: str, vocab_size: int, max_length: int, lowercase: bool = True) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(
                f"tokenizer.algorithm={algorithm!r} is not supported; allowed values: {', '.join(ALGORITHMS)}"
            )
        _check_positive(vocab_size=vocab_size, max_length=max_length)
        if max_length < 3:
            raise ValueError(f"tokenizer.max_length must be >= 3 to hold [CLS] x [SEP], got {max_length}")
        self.algorithm, self.max_length, self.lowercase = algorithm, max_length, lowercase
        self._vocab_size = vocab_size
        self._fingerprint: str | None = None
        self._tok = None

    @property
    def vocab_size(self) -> int:
        return max(self._vocab_size, self.trained_vocab_size)

    @property
    def trained_vocab_size(self) -> int:
        return self._tok.get_vocab_size() if self._tok is not None else 0

    def cache_key(self) -> str:
        if self._fingerprint is None:
            raise RuntimeError("SubwordTokenizer.cache_key() needs prepare(texts, cache_dir) to run first")
        case = "lower" if self.lowercase else "cased"
        return f"{self.algorithm}-{self.RECIPE}-{self._vocab_size}-{case}-len{self.max_length}-{self._fingerprint}"

    def prepare(self, texts: Iterable[str], cache_dir: Path) -> None:
        """Train on `texts` or load the cached vocabulary trained on the same texts."""
        from tokenizers import Tokenizer

        texts = texts if isinstance(texts, Sequence) else list(texts)
        digest = hashlib.sha256()
        for text in texts:
            digest.update(text.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")  # separator: ["ab", "c"] != ["a", "bc"]
        self._fingerprint = digest.hexdigest()[:16]
        path = Path(cache_dir) / f"{self.cache_key()}.json"
        if path.exists():
            tok = Tokenizer.from_file(str(path))
        else:
            tok = self._train(texts)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")   # per process: packed cells build one vocabulary at once
            tok.save(str(tmp))
            tmp.replace(path)  # atomic: a crash never leaves a torn vocabulary
        tok.enable_truncation(self.max_length)
        tok.enable_padding(length=self.max_length, pad_id=0, pad_token="[PAD]")
        self._tok = tok

    def _train(self, texts: Sequence[str]):
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

        if self.algorithm == "wordpiece":  # BERT recipe
            def wordpiece():
                tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
                tok.normalizer = normalizers.BertNormalizer(lowercase=self.lowercase)
                tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
                tok.decoder = decoders.WordPiece()
                return tok

            # The trainer gives each '##x' (a character inside a word) the next id as it meets it while
            # iterating a Rust HashMap of words, in an order that changes with every process; merges of equal
            # count are then ranked by those ids, so both the numbering and the pieces changed from run to run.
            # A first pass that stops before any merge lists those pieces; the real pass receives them, sorted,
            # right after the specials, where the trainer finds them already numbered.
            probe = wordpiece()
            probe.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1, special_tokens=SPECIALS,
                                                                       show_progress=False), length=len(texts))
            inner = sorted(p for p in probe.get_vocab() if p.startswith("##") and p not in SPECIALS)
            tok = wordpiece()
            trainer = trainers.WordPieceTrainer(
                vocab_size=self._vocab_size, special_tokens=SPECIALS + inner, show_progress=False
            )
        else:  # SentencePiece-style unigram, as ALBERT
            tok = Tokenizer(models.Unigram())
            steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if self.lowercase else [])
            tok.normalizer = normalizers.Sequence(steps)
            tok.pre_tokenizer = pre_tokenizers.Metaspace()
            tok.decoder = decoders.Metaspace()
            trainer = trainers.UnigramTrainer(
                vocab_size=self._vocab_size, special_tokens=SPECIALS, unk_token="[UNK]", show_progress=False
            )
        tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
        tok = Tokenizer.from_str(json.dumps(self._canonical(json.loads(tok.to_str()))))
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
        )
        return tok

    @staticmethod
    def _canonical(spec: dict) -> dict:
        """A trained tokenizer's JSON with nothing left that depends on the process.

        WordPiece: the '##x' pieces handed to the trainer as specials become ordinary vocabulary again (their
        ids stay; only SPECIALS are added tokens). Unigram: the trainer's EM sums in an order that changes with
        the process, so its scores differ in the last digit (~1e-15) from run to run; they are rounded to
        SCORE_DECIMALS (1e-6 on a log-probability, ~1e9 times that noise), and pieces of equal score, which the
        trainer returns in HashMap order, are ranked by the piece itself (ids follow the order; SPECIALS first).
        """
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in SPECIALS]
        model = spec["model"]
        if model["type"] == "Unigram":
            head, rest = model["vocab"][: len(SPECIALS)], model["vocab"][len(SPECIALS):]
            if [piece for piece, _ in head] != SPECIALS:
                raise RuntimeError(f"Unigram trainer did not put {SPECIALS} first: {head}")
            rest = [[piece, round(score, SubwordTokenizer.SCORE_DECIMALS)] for piece, score in rest]
            model["vocab"] = head + sorted(rest, key=lambda entry: (-entry[1], entry[0]))
        return spec

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Encode to input_ids and attention_mask, both (B, max_length)."""
        if self._tok is None:
            raise RuntimeError("SubwordTokenizer.encode() needs prepare(texts, cache_dir) to run first")
        # every whitespace word yields at least one token, so the first max_length words give the same
        # truncated ids as the whole text, at a fraction of the cost on 10 kB patent claims
        encs = self._tok.encode_batch([" ".join(t.split()[: self.max_length]) for t in texts])
        ids = torch.tensor([e.ids for e in encs], dtype=torch.long).reshape(len(encs), self.max_length)
        mask = torch.tensor([e.attention_mask for e in encs], dtype=torch.long).reshape(
            len(encs), self.max_length
        )
        return {"input_ids": ids, "attention_mask": mask}

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict:
        """Pre-split words -> `[CLS] pieces [SEP]` ids and mask (B, max_length), plus each word's first piece.

        The first piece position comes from the tokenizer's own word ids (-1: the word was truncated away or gave
        no piece).
        """
        if self._tok is None:
            raise RuntimeError("SubwordTokenizer.encode_words() needs prepare(texts, cache_dir) to run first")
        encs = self._tok.encode_batch([list(words) for words in sentences], is_pretokenized=True)
        first = []
        for enc, words in zip(encs, sentences):
            starts = [-1] * len(words)
            for position, word in enumerate(enc.word_ids):
                if word is not None and starts[word] < 0:
                    starts[word] = position
            first.append(starts)
        shape = (len(encs), self.max_length)
        return {"input_ids": torch.tensor([e.ids for e in encs], dtype=torch.long).reshape(shape),
                "attention_mask": torch.tensor([e.attention_mask for e in encs], dtype=torch.long).reshape(shape),
                "first": first}


class CodepointTokenizer:
    """Unicode code points for CANINE ORIG: [CLS]=0xE000, text code points, [SEP]=0xE001, pad 0.

    NUL is removed (0 is the pad). Text is truncated to max_length - 2 code points so [CLS] and [SEP]
    always fit. vocab_size is the code-point range 0x110000; CANINE hashes ids, it has no such table.
    """

    CLS, SEP = 0xE000, 0xE001

    def __init__(self, max_length: int) -> None:
        if max_length < 3:
            raise ValueError(f"tokenizer.max_length must be >= 3 to hold [CLS] x [SEP], got {max_length}")
        self.max_length = max_length
        self.vocab_size = 0x110000

    def prepare(self, texts: Iterable[str], cache_dir: Path) -> None:
        """Nothing to train."""

    def cache_key(self) -> str:
        return f"codepoints-len{self.max_length}"

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """Encode to input_ids and attention_mask, both (B, max_length)."""
        ids = np.zeros((len(texts), self.max_length), dtype=np.int64)
        for b, text in enumerate(texts):
            cps = np.frombuffer(
                text.replace("\x00", "")[: self.max_length - 2].encode("utf-32-le", "surrogatepass"),
                dtype="<u4",
            )
            ids[b, 0] = self.CLS
            ids[b, 1 : 1 + len(cps)] = cps
            ids[b, 1 + len(cps)] = self.SEP
        ids_t = torch.from_numpy(ids)
        return {"input_ids": ids_t, "attention_mask": (ids_t != 0).long()}
