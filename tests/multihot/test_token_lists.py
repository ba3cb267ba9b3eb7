"""Token lists are a function of the corpus alone (issue 33 #9): the same input gives the same lists, byte for byte,
in any process, whatever the hash seed or thread count. `tokenizers`' BPE trainer did not (its Rust HashMap seed
is random per process), so Table 1's BPE base came out 9,989 / 9,988 tokens from one run to the next.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from langrepr.data.korean.corpus import nsmc_neutral_reviews
from langrepr.data.korean.morphemes import analyser_name, corpus_key
from langrepr.data.korean.prepare import list_key, token_lists
from langrepr.data.korean.token_lists import BPE_TRAINER, CONTINUATION, KINDS, SPECIALS, TokenList, train_bpe

DATA = Path(os.environ["LANGREPR_DATA_DIR"]) if os.environ.get("LANGREPR_DATA_DIR") else None

# One fresh interpreter: build the BPE base and BPE + syllable lists of the pseudo-analysed corpus in argv[1]
# and print the sha256 of each list's bytes.
BUILD = """
import hashlib, json, sys
from langrepr.data.korean.token_lists import bpe_base, bpe_syllable, syllable_tokens
analysed = [[tuple(m) for m in s] for s in json.loads(open(sys.argv[1], encoding="utf-8").read())]
base = bpe_base(analysed, bpe_size=4000, pos_joined=100)
lists = {"bpe_base": base, "bpe_syllable": bpe_syllable(base, syllable_tokens(analysed, 300))}
print(json.dumps({k: [len(v.tokens), hashlib.sha256(json.dumps(v.tokens, ensure_ascii=False).encode()).hexdigest()]
                  for k, v in lists.items()}))
"""


def build_in_fresh_process(corpus: Path, hash_seed: str, threads: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "RAYON_RS_NUM_THREADS": threads,
           "RAYON_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "true"}
    run = subprocess.run([sys.executable, "-c", BUILD, str(corpus)], env=env, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_bpe_lists_are_byte_identical_across_fresh_processes(tmp_path):
    """Real Korean text (1,500 NSMC reviews, words standing in for morphemes: BPE reads forms only), two fresh
    interpreters with other hash seeds and thread counts: the same lists, compared by sha256 of their bytes."""
    if DATA is None or not (DATA / "nsmc" / "nsmc_raw_reviews.tsv.gz").exists():
        pytest.skip("needs LANGREPR_DATA_DIR with nsmc/nsmc_raw_reviews.tsv.gz (real Korean text)")
    reviews = nsmc_neutral_reviews(DATA, 1500)
    corpus = tmp_path / "analysed.json"
    corpus.write_text(json.dumps([[(w, "NNG") for w in r.split()] for r in reviews], ensure_ascii=False),
                      encoding="utf-8")
    first = build_in_fresh_process(corpus, "1", "1")
    second = build_in_fresh_process(corpus, "2", "2")
    assert first == second
    assert first["bpe_base"][0] == 4100      # 3,995 BPE pieces (1,964 characters, the rest merges) + 100 + 5 specials


def test_bpe_ignores_sentence_order_and_breaks_ties_by_id():
    """The vocabulary depends on word counts only, and equal-count merges go to the pair of lower ids."""
    rng = random.Random(0)
    syllables = [chr(0xAC00 + 28 * i) for i in range(30)]            # 가 까 나 ... (no final consonant)
    sentences = [[("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))), "NNG") for _ in range(8)]
                 for _ in range(300)]
    vocab = train_bpe(sentences, vocab_size=400)
    shuffled = sentences[:]
    rng.shuffle(shuffled)
    assert train_bpe(shuffled, vocab_size=400) == vocab
    assert len(vocab) == 400 - len(SPECIALS)
    chars = sorted({c for s in sentences for f, _ in s for c in f})
    assert vocab[:len(chars)] == chars and vocab[len(chars)] == CONTINUATION + chars[0]
    # "가나" and "##나다" occur equally often in "가나다" alone: the pair of lower ids ("가" + "##나") merges first
    tie = train_bpe([[("가나다", "NNG")]] * 3, vocab_size=len(SPECIALS) + 6)
    assert tie == ["가", "나", "다", "##나", "##다", "가나"]
    # a pair seen fewer than min_frequency times is never merged
    assert train_bpe([[("가나", "NNG")]], vocab_size=100) == ["가", "나", "##나"]


def test_lists_cached_by_the_old_trainer_are_kept_and_named(tmp_path, caplog):
    """A cached list from before the fix is still served (a model may have been trained on its ids), with one
    warning that says how to rebuild it; a list from `train_bpe` is served silently."""
    text = tmp_path / "corpus.txt"
    text.write_text("영화가 정말 재미있었다.\n", encoding="utf-8")
    corpus, sizes = {"name": "tiny", "source": "text", "path": str(text)}, {"bpe_size": 10}
    folder = tmp_path / "korean_token_lists" / list_key(corpus_key("tiny", ["영화가 정말 재미있었다."]), sizes)
    for meta in ({"bpe_pieces": 1}, {"bpe_trainer": BPE_TRAINER}):
        for kind in KINDS:
            TokenList(kind, [*SPECIALS, "영화"], analyser_name(), meta).save(folder / f"{kind}.json")
        caplog.clear()
        lists = token_lists(corpus, sizes, str(tmp_path), workers=1)
        assert lists["bpe_base"].tokens == [*SPECIALS, "영화"]
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        if "bpe_trainer" in meta:
            assert warned == []
        else:
            assert len(warned) == 1 and "varied from run to run" in warned[0] and "delete that folder" in warned[0]


@pytest.mark.slow
def test_token_lists_stage_from_empty_caches_is_identical_across_processes(tmp_path):
    """The whole stage (Kiwi analysis with 1 vs 2 workers, the three lists) from empty caches, twice."""
    if DATA is None or not (DATA / "nsmc" / "nsmc_raw_reviews.tsv.gz").exists():
        pytest.skip("needs LANGREPR_DATA_DIR with nsmc/nsmc_raw_reviews.tsv.gz (real Korean text)")
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(nsmc_neutral_reviews(DATA, 600)) + "\n", encoding="utf-8")
    stage = ("import hashlib, sys\n"
             "from langrepr.data.korean.prepare import token_lists\n"
             "lists = token_lists({'name': 'nsmc600', 'source': 'text', 'path': sys.argv[1]},\n"
             "    {'bpe_size': 1500, 'pos_joined': 100, 'syllables': 300, 'dictionary_size': 800},\n"
             "    sys.argv[2], workers=int(sys.argv[3]))\n"
             "print({k: hashlib.sha256('\\n'.join(v.tokens).encode()).hexdigest() for k, v in lists.items()})\n")
    shas = []
    for seed, workers in (("1", "1"), ("2", "2")):
        env = {**os.environ, "PYTHONHASHSEED": seed, "RAYON_RS_NUM_THREADS": workers}
        run = subprocess.run([sys.executable, "-c", stage, str(text), str(tmp_path / f"cache{seed}"), workers],
                             env=env, capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
        shas.append(run.stdout.strip().splitlines()[-1])
    assert shas[0] == shas[1]
    assert len(list((tmp_path / "cache1").rglob("*.json"))) == 3    # the lists were built, not read
