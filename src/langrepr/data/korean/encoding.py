"""Morphemes → input positions under a token list: a single token, BPE pieces, or one multi-hot group.

Under a multi-hot list (`bpe_syllable`, `dict_syllable`) a morpheme whose form is a token is one position with
one id; otherwise it is ONE position holding the group of its `@`-syllable ids (the paper's Figure 1). Under the
BPE base list a morpheme is its `form/TAG` token if listed, else its BPE pieces, one position each (no groups).
Every position also carries the morpheme's POS tag and the index of the morpheme it came from, so answers can be
mapped back to morpheme units (KorQuAD, Table 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langrepr.data.korean.morphemes import Morpheme
from langrepr.data.korean.token_lists import CONTINUATION, SYLLABLE_PREFIX, UNK, TokenList
from langrepr.errors import UserError

# Sejong-style tags Kiwi emits (base tags), plus the specials' tag; ids are positions in this tuple
POS_TAGS = ("[SPECIAL]", "NNG", "NNP", "NNB", "NR", "NP", "VV", "VA", "VX", "VCP", "VCN", "MM", "MAG", "MAJ", "IC",
            "JKS", "JKC", "JKG", "JKO", "JKB", "JKV", "JKQ", "JX", "JC", "EP", "EF", "EC", "ETN", "ETM", "XPN",
            "XSN", "XSV", "XSA", "XSM", "XR", "SF", "SP", "SS", "SSO", "SSC", "SE", "SO", "SW", "SL", "SH", "SN",
            "SB", "UN", "W_URL", "W_EMAIL", "W_HASHTAG", "W_MENTION", "W_SERIAL", "W_EMOJI", "Z_CODA", "Z_SIOT",
            "USER0", "USER1", "USER2", "USER3", "USER4", "OTHER")
POS_INDEX = {t: i for i, t in enumerate(POS_TAGS)}


@dataclass
class Encoded:
    """One sentence as input positions: `groups[i]` = token ids at position i (length 1 unless multi-hot)."""

    groups: list[list[int]]
    pos: list[int]
    morpheme_of: list[int]       # which morpheme (index into the sentence) each position came from
    divided: list[bool]          # per morpheme: did the token list split it (several positions or a group)?


class MorphemeEncoder:
    """Encode analysed sentences with a token list; `max_group` caps the slots of one multi-hot group."""

    def __init__(self, token_list: TokenList, max_group: int = 16, long_groups: str = "split"):
        if long_groups not in ("split", "error"):
            raise UserError(f"unknown long_groups '{long_groups}': use split or error")
        self.tokens, self.max_group, self.long_groups = token_list, max_group, long_groups
        self.index = token_list.index

    def syllable_ids(self, form: str) -> list[int]:
        return [self.index.get(SYLLABLE_PREFIX + c, UNK) for c in form if not c.isspace()]

    def bpe_pieces(self, form: str) -> list[int]:
        """Greedy longest-match over the list's BPE pieces (`##` marks a continuation), WordPiece style."""
        out = []
        for word in form.split():
            start = 0
            while start < len(word):
                for end in range(len(word), start, -1):
                    piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                    if piece in self.index:
                        out.append(self.index[piece])
                        start = end
                        break
                else:
                    out.append(UNK)
                    start += 1
        return out or [UNK]

    def morpheme_positions(self, form: str, tag: str) -> list[list[int]]:
        if self.tokens.multi_hot:
            if form in self.index:
                return [[self.index[form]]]
            group = self.syllable_ids(form) or [UNK]
            if len(group) <= self.max_group:
                return [group]
            if self.long_groups == "error":
                raise UserError(f"morpheme '{form}' needs {len(group)} syllable slots but max_group is "
                                f"{self.max_group}: raise model max_group or set long_groups=split")
            return [group[i:i + self.max_group] for i in range(0, len(group), self.max_group)]
        joined = f"{form}/{tag}"
        if joined in self.index:
            return [[self.index[joined]]]
        return [[i] for i in self.bpe_pieces(form)]

    def encode(self, morphemes: Sequence[Morpheme]) -> Encoded:
        groups, pos, origin, divided = [], [], [], []
        for m_index, (form, tag) in enumerate(morphemes):
            positions = self.morpheme_positions(form, tag)
            divided.append(len(positions) > 1 or len(positions[0]) > 1)
            for group in positions:
                groups.append(group)
                pos.append(POS_INDEX.get(tag, POS_INDEX["OTHER"]))
                origin.append(m_index)
        return Encoded(groups, pos, origin, divided)


def coverage(encoder: MorphemeEncoder, analysed: Sequence[Sequence[Morpheme]]) -> dict[str, float]:
    """How a token list covers a corpus: share of morphemes divided, positions per morpheme, mean group size."""
    morphemes = positions = divided = slots = unk = 0
    for sentence in analysed:
        enc = encoder.encode(sentence)
        morphemes += len(sentence)
        positions += len(enc.groups)
        divided += sum(enc.divided)
        slots += sum(len(g) for g in enc.groups)
        unk += sum(i == UNK for g in enc.groups for i in g)
    return {"morphemes": morphemes, "divided_share": divided / max(morphemes, 1),
            "positions_per_morpheme": positions / max(morphemes, 1), "ids_per_position": slots / max(positions, 1),
            "unk_share": unk / max(slots, 1)}
