"""Synthetic US patents in the export's parquet format, for the quick profile and the tests.

No real patent corpus is available offline (shared/data/uspto/SOURCE.md: "Gap"), so this
generates documents with the properties the EWE paper's experiments depend on (arXiv
2302.13475 §5.1, Table 2), and marks them ``synthetic`` in every row and in the manifest:

* long-tailed subclass frequencies: Zipf-like popularity, so a few codes carry most documents;
* 1-6 CPC codes per document with exactly one ``first`` (the primary is not always at array
  index 0, as in the real table where only the flag is documented);
* claim-like text ("1. A method for ... 2. The method of claim 1, wherein ...") whose words
  depend on the codes *and on their position*: each subclass has disjoint "core" words, used
  when it is First (claim 1), and "aux" words, used when it is Later (dependent claims), so
  First-X and Later-X are separately learnable; a shared per-section vocabulary and swapped
  words add confusion;
* rare pseudo-technical words (a large pool, a few per document) for the long-tailed lexicon.

Deterministic given the arguments: each split draws from its own ``default_rng([seed, k])``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from langrepr.data.patents.files import (
    FORMAT,
    SPLITS,
    read_manifest,
    shards_intact,
    split_counts,
    write_manifest,
    write_shard,
)

_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "x", "z",
           "ch", "th", "ph", "tr", "pl", "cr", "st", "gl")
_VOWELS = ("a", "e", "i", "o", "u", "y", "ae", "io")
_SUFFIXES = ("ase", "ide", "ometer", "ation", "ene", "ite", "ol", "ium", "ator", "ode", "ane", "yl")
_COMMON = ("a", "the", "said", "wherein", "comprising", "having", "configured", "to", "and", "of",
           "at", "least", "one", "first", "second", "portion", "member", "unit", "plurality",
           "coupled", "with", "in", "is", "further", "each", "by", "being", "from", "on")
_NOUNS = ("method", "system", "apparatus", "device", "composition", "assembly")
_SECTIONS = "ABCDEFGHY"
_SUBCLASS_LETTERS = "ABCDFGHJKLMNPQRSTW"


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    """N distinct technical-looking words ("thoraxide", "plenometer")."""
    words: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        k = int(rng.integers(2, 4))
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(k))
        w += _SUFFIXES[rng.integers(len(_SUFFIXES))]
        if w not in words:
            words.add(w)
            out.append(w)
    return out


class _World:
    """The fixed 'technology': codes, popularity, per-code vocabularies (shared by all splits)."""

    def __init__(self, seed: int, n_subclasses: int, zipf: float, words_per_code: int, n_rare: int):
        rng = np.random.default_rng([seed, 1000])
        codes: set[str] = set()
        while len(codes) < n_subclasses:
            codes.add(f"{_SECTIONS[rng.integers(len(_SECTIONS))]}{int(rng.integers(1, 100)):02d}"
                      f"{_SUBCLASS_LETTERS[rng.integers(len(_SUBCLASS_LETTERS))]}")
        self.codes = sorted(codes)
        rank = rng.permutation(n_subclasses)                   # popularity rank of codes[i]
        pop = 1.0 / (rank + 1.0) ** zipf
        self.pop = pop / pop.sum()
        # related codes: mostly in the same section, so Later codes co-occur in patterns
        self.partners = []
        for i, c in enumerate(self.codes):
            same = [j for j, d in enumerate(self.codes) if d[0] == c[0] and j != i] or [i]
            self.partners.append(rng.choice(same, size=min(3, len(same)), replace=False))
        pool = _pseudo_words(rng, 2 * words_per_code * n_subclasses + 16 * len(_SECTIONS) + n_rare)
        w = words_per_code
        self.core = [pool[2 * w * i: 2 * w * i + w] for i in range(n_subclasses)]       # First-X words
        self.aux = [pool[2 * w * i + w: 2 * w * (i + 1)] for i in range(n_subclasses)]  # Later-X words
        off = 2 * w * n_subclasses
        self.section = {s: pool[off + 16 * k: off + 16 * (k + 1)] for k, s in enumerate(_SECTIONS)}
        self.rare = pool[off + 16 * len(_SECTIONS):]


def _pick(rng: np.random.Generator, words: list[str], n: int) -> list[str]:
    return [words[i] for i in rng.integers(len(words), size=n)]


def _document(world: _World, rng: np.random.Generator, noise: float, first: int | None = None
              ) -> tuple[list[dict], str]:
    """One document: its cpc records and its claims text (`first`: its primary subclass, else drawn)."""
    n_codes = 1 + min(5, int(rng.poisson(1.3)))
    first = int(rng.choice(len(world.codes), p=world.pop)) if first is None else first
    later: list[int] = []
    for _ in range(n_codes - 1):
        u = rng.random()
        if u < 0.2:
            later.append(first)                                # [A01B, G06Q, A01B]: X both First and Later
        elif u < 0.55:
            later.append(int(rng.choice(world.partners[first])))
        else:
            later.append(int(rng.choice(len(world.codes), p=world.pop)))
    subs = [first] + later
    cpc = [{"code": f"{world.codes[s]}{int(rng.integers(1, 100))}/{int(rng.integers(0, 100)):02d}",
            "first": i == 0, "inventive": bool(i == 0 or rng.random() < 0.4)} for i, s in enumerate(subs)]
    if len(cpc) > 1 and rng.random() < 0.3:                    # primary not at index 0
        perm = rng.permutation(len(cpc))
        cpc = [cpc[i] for i in perm]

    def topic(words: list[str], n: int) -> list[str]:
        out = _pick(rng, words, n)
        for k in range(n):                                     # confusion: words of random other codes
            if rng.random() < noise:
                j = int(rng.integers(len(world.codes)))
                out[k] = world.core[j][rng.integers(len(world.core[j]))] if rng.random() < 0.5 \
                    else world.aux[j][rng.integers(len(world.aux[j]))]
        return out

    noun = _NOUNS[rng.integers(len(_NOUNS))]
    sec = world.section[world.codes[first][0]]
    c1 = topic(world.core[first], 6) + _pick(rng, sec, 2)
    claims = [f"A {noun} for {c1[0]} {c1[1]}, comprising: a {c1[2]} {_pick(rng, _COMMON, 1)[0]} "
              f"{c1[3]}; a {c1[6]} {c1[4]} configured to {c1[5]} the {c1[7]}."]
    n_claims = max(len(later) + 2, min(30, 2 + int(rng.poisson(8))))
    for k in range(2, n_claims + 1):
        if k - 2 < len(later):                                 # Later codes speak in the first dependents
            words = topic(world.aux[later[k - 2]], 4)
        else:
            src = [world.core[first], sec] + [world.aux[s] for s in later]
            words = topic(src[int(rng.integers(len(src)))], 4)
        filler = " ".join(_pick(rng, _COMMON, int(rng.integers(2, 6))))
        if rng.random() < 0.03:
            claims.append("(canceled)")
        else:
            claims.append(f"The {noun} of claim {int(rng.integers(1, k))}, wherein the {words[0]} {filler} "
                          f"{words[1]} {words[2]} is {words[3]}.")
    for _ in range(int(rng.integers(1, 4))):                   # rare lexicon
        k = int(rng.integers(len(claims)))
        claims[k] = claims[k][:-1] + f" {world.rare[rng.integers(len(world.rare))]}."
    text = "What is claimed is:\n" + "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    return cpc, text


def _date(rng: np.random.Generator, years: tuple[int, int], months: tuple[int, int]) -> int:
    y = int(rng.integers(years[0], years[1] + 1))
    m = int(rng.integers(months[0], months[1] + 1))
    return y * 10000 + m * 100 + int(rng.integers(1, 29))


_SPLIT_DATES = {"train": ((2006, 2014), (1, 12)), "2015A": ((2015, 2015), (1, 6)), "2015B": ((2015, 2015), (7, 12))}


def generate(out_dir: str | Path, n_train: int = 8000, n_test: int = 1000, n_subclasses: int = 64,
             seed: int = 0, zipf: float = 1.8, noise: float = 0.15, words_per_code: int = 12,
             n_rare: int = 5000, shard_rows: int = 50_000, cover_all: bool = False) -> Path:
    """Write a synthetic export to ``out_dir``; returns the manifest path.

    A rerun with the same arguments and intact shards returns at once (manifest check).

    Args:
        out_dir: folder for the shards and manifest.json.
        n_train: documents in the train split.
        n_test: documents in each of 2015A and 2015B.
        n_subclasses: distinct CPC subclasses (the paper has 664).
        seed: everything random derives from it.
        zipf: popularity exponent; 1.8 puts ~30% of the codes over 90% of label occurrences (paper §5.5).
        noise: share of topic words replaced by words of random codes.
        words_per_code: size of each subclass's First and of its Later vocabulary.
        n_rare: size of the rare-word pool.
        shard_rows: rows per parquet shard.
        cover_all: the first ``n_subclasses`` training documents take each subclass once as their First code, so
            the training labels hold every subclass (relabeled: 2 x n_subclasses labels, the paper's 1,328 at 664);
            the dry run's full-schema stand-in (`langrepr.data.standin`). Off: the long tail decides.
    """
    out_dir = Path(out_dir)
    params = dict(n_train=n_train, n_test=n_test, n_subclasses=n_subclasses, seed=seed, zipf=zipf,
                  noise=noise, words_per_code=words_per_code, n_rare=n_rare, shard_rows=shard_rows,
                  **({"cover_all": True} if cover_all else {}))   # absent when off: earlier manifests still match
    old = read_manifest(out_dir)
    if old is not None and old.get("params") == params and shards_intact(out_dir, old["shards"]):
        return out_dir / "manifest.json"
    t0 = time.time()
    world = _World(seed, n_subclasses, zipf, words_per_code, n_rare)
    shards: list[dict] = []
    serial = 7_000_000
    for k, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, k])
        n = n_train if split == "train" else n_test
        years, months = _SPLIT_DATES[split]
        records = []
        for i in range(n):
            cover = cover_all and split == "train" and i < n_subclasses
            cpc, text = _document(world, rng, noise, first=i if cover else None)
            pub = _date(rng, years, months)
            serial += 1
            records.append({"publication_number": f"US-{serial}-B2", "kind_code": "B2", "publication_date": pub,
                            "filing_date": pub - 10000 * int(rng.integers(1, 5)), "split": split,
                            "claims": text, "cpc": cpc, "synthetic": True})
        for i in range(0, n, shard_rows):
            shards.append(write_shard(out_dir / f"{split}-{i // shard_rows:05d}.parquet", records[i:i + shard_rows]))
    for stale in set(out_dir.glob("*.parquet")) - {out_dir / s["file"] for s in shards}:
        stale.unlink()                                          # from an earlier run with other sizes
    manifest = {"format": FORMAT, "synthetic": True, "source": "langrepr.data.patents.synthetic",
                "params": params, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(time.time() - t0, 2), "rows": split_counts(shards),
                "subclasses": world.codes, "shards": shards}
    return write_manifest(out_dir, manifest)


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m langrepr.data.patents.synthetic --out DIR [--n-train N ...]``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--n-train", type=int, default=8000)
    p.add_argument("--n-test", type=int, default=1000, help="documents in each of 2015A and 2015B")
    p.add_argument("--n-subclasses", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--zipf", type=float, default=1.8)
    p.add_argument("--noise", type=float, default=0.15)
    p.add_argument("--shard-rows", type=int, default=50_000)
    a = p.parse_args(argv)
    path = generate(a.out, n_train=a.n_train, n_test=a.n_test, n_subclasses=a.n_subclasses, seed=a.seed,
                    zipf=a.zipf, noise=a.noise, shard_rows=a.shard_rows)
    print(f"synthetic patents (NOT real data): {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
