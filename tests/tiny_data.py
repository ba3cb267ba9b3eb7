"""Tiny data folders laid out like shared/data, for the cell-identity, cache-key and lifecycle tests."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Callable
from pathlib import Path

WORDS = {"the": ("DET", "O"), "cat": ("NOUN", "O"), "sat": ("VERB", "O"), "on": ("ADP", "O"),
         "mat": ("NOUN", "O"), "Paris": ("PROPN", "I-LOC"), "John": ("PROPN", "I-PER"), "saw": ("VERB", "O")}
SENTENCES = [["the", "cat", "sat", "on", "the", "mat"], ["John", "saw", "the", "cat"], ["the", "cat", "saw", "Paris"]]


def write_english_probe_data(root: Path) -> Path:
    """GUM (UPOS) and CoNLL-2003 (NER) splits laid out as in shared/data, three sentences each."""
    gum = root / "ud_english_gum" / "r2.5"
    gum.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        lines = []
        for k, s in enumerate(SENTENCES):
            lines += [f"# sent_id = {split}{k}"]
            lines += [f"{i}\t{w}\t{w}\t{WORDS[w][0]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(s, 1)] + [""]
        (gum / f"en_gum-ud-{split}.conllu").write_text("\n".join(lines) + "\n")
    conll = root / "conll2003"
    conll.mkdir(parents=True, exist_ok=True)
    for name in ("eng.train", "eng.testa", "eng.testb"):
        lines = ["-DOCSTART- -X- O O", ""]
        for s in SENTENCES:
            lines += [f"{w} NN I-NP {WORDS[w][1]}" for w in s] + [""]
        (conll / name).write_text("\n".join(lines) + "\n")
    return root


TOPICS = {1: "ball team match goal score", 2: "market stock bank profit trade", 3: "vote law minister election war",
          4: "chip software phone data code"}


def write_topic_csv(path: Path, per_class: int, fields: Callable[[int, list[str]], list[str]]) -> Path:
    """A Zhang et al. 2015-style CSV, every field quoted.

    per_class rows of each of the four TOPICS, each row its class index and then ``fields(i, topic_words)``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        for i in range(per_class):
            for label, words in TOPICS.items():
                writer.writerow([label, *fields(i, words.split())])
    return path


def write_zhang(folder: Path, per_class: int = 6) -> Path:
    """An AG News-style folder (train.csv, test.csv: class index, title, description)."""
    for name in ("train.csv", "test.csv"):
        write_topic_csv(folder / name, per_class, lambda i, w: [f"{w[i % 5]} news {i}", " ".join(w)])
    return folder


def write_agnews_test(folder: Path, per_class: int) -> Path:
    """An AG News-style test.csv alone, per_class rows of each of four topics."""
    write_topic_csv(folder / "test.csv", per_class,
                    lambda i, w: [f"{w[i % 5]} today", f"{w[(i + 1) % 5]} and {w[(i + 3) % 5]} news {i}"])
    return folder


REVIEWS = ["영화가 정말 재미있었다", "배우들의 연기가 좋았다", "음악이 아름다운 영화였다", "스토리가 조금 지루했다",
           "감독의 다음 작품이 기대된다", "아르키메데스 이야기는 신기했다"]


def write_korquad_dev(root: Path, version: str | None = None, articles: int = 10) -> Path:
    """korquad1/KorQuAD_v1.0_dev.json: `articles` one-question articles (with a "version" field when given)."""
    (root / "korquad1").mkdir(parents=True, exist_ok=True)
    articles = [{"title": f"문서{i}", "paragraphs": [{"context": f"문서{i}는 19{i}0년에 세워졌다. 그 뒤 서울로 옮겼다.", "qas": [
        {"id": f"q{i}", "question": "세워진 해는?", "answers": [{"text": f"19{i}0년", "answer_start": 4 + len(str(i))}]}]}]}
        for i in range(articles)]
    payload = {"version": version, "data": articles} if version else {"data": articles}
    path = root / "korquad1" / "KorQuAD_v1.0_dev.json"
    path.write_text(json.dumps(payload, ensure_ascii=False))
    return path


def write_korean_quick(root: Path, reviews: int = 60, korquad_version: str | None = None) -> Path:
    """The files the quick Korean corpus reads: NSMC raw reviews, KorQuAD dev, KLUE NLI/STS dev."""
    (root / "nsmc").mkdir(parents=True, exist_ok=True)
    with gzip.open(root / "nsmc" / "nsmc_raw_reviews.tsv.gz", "wt") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n")
        for i in range(reviews):
            fh.write(f"{i}\t{i % 7}\t{5 + i % 4}\t14.08.01\t{REVIEWS[i % 6]} {REVIEWS[(i * 5) % 6]}\n")
    write_korquad_dev(root, korquad_version)
    (root / "klue").mkdir(exist_ok=True)
    (root / "klue" / "klue-nli-v1.1_dev.json").write_text(json.dumps(
        [{"premise": "숙소가 깨끗했습니다.", "hypothesis": "방이 더러웠습니다."}], ensure_ascii=False))
    (root / "klue" / "klue-sts-v1.1_dev.json").write_text(json.dumps(
        [{"sentence1": "호스트가 친절했습니다.", "sentence2": "주인이 친절했어요."}], ensure_ascii=False))
    return root


KOREAN_SENTENCES = ["박씨는 서울에 산다", "김씨가 부산에서 왔다", "한국은행이 금리를 올렸다", "이씨는 대구에 갔다"]


def write_korean_downstream(root: Path, ner_sentences: int = 16, korquad_articles: int = 10) -> Path:
    """What the multi-hot fine-tuning cells read, tiny: the pretraining corpus's files and each task's data.

    NSMC raw reviews rated 1-10 (the 5-8 ones feed the pretraining corpus, the others the NSMC-style split), KLUE
    NLI/STS dev, a KLUE-NER dev file (a PS or OG entity in each sentence), KorQuAD dev, and a MODU-format SRL file
    at `root/srl.json` (outside the default path: a cell reads it only when pointed at it).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "nsmc").mkdir(exist_ok=True)
    reviews = ["영화가 정말 재미있었다", "배우들의 연기가 좋았다", "스토리가 너무 지루했다", "돈이 아까운 영화"]
    with gzip.open(root / "nsmc" / "nsmc_raw_reviews.tsv.gz", "wt") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n")
        for i in range(60):
            fh.write(f"{i}\t{i % 5}\t{(1, 3, 5, 7, 9, 10)[i % 6]}\t14.08.01\t{reviews[i % 4]} {i}\n")
    (root / "klue").mkdir(exist_ok=True)
    (root / "klue" / "klue-nli-v1.1_dev.json").write_text(json.dumps(
        [{"premise": s, "hypothesis": s[::-1]} for s in KOREAN_SENTENCES], ensure_ascii=False))
    (root / "klue" / "klue-sts-v1.1_dev.json").write_text(json.dumps(
        [{"sentence1": s, "sentence2": s + "."} for s in KOREAN_SENTENCES], ensure_ascii=False))
    ner = ""
    for i in range(ner_sentences):
        text = KOREAN_SENTENCES[i % 4]
        tags = ["B-OG" if i % 4 == 2 else "B-PS"] + ["O"] * (len(text) - 1)
        ner += f"## n{i}\t{text}\n" + "".join(f"{c}\t{t}\n" for c, t in zip(text, tags)) + "\n"
    (root / "klue" / "klue-ner-v1.1_dev.tsv").write_text("## 컬럼명 : CHAR\tNE_TAG\n" + ner, encoding="utf-8")
    sentences = [{"id": f"s{i}", "form": "철수가 밥을 먹었다.", "SRL": [{
        "predicate": {"form": "먹", "begin": 7, "end": 8}, "argument": [
            {"form": "철수가", "label": "ARG0", "begin": 0, "end": 3},
            {"form": "밥을", "label": "ARG1", "begin": 4, "end": 6}]}]} for i in range(12)]
    write_korquad_dev(root, version="KorQuAD_v1.0_dev", articles=korquad_articles)
    (root / "srl.json").write_text(json.dumps({"document": [{"id": "d", "sentence": sentences}]}, ensure_ascii=False))
    return root


def flip_one_byte(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))


def write_ptb_and_multi30k(root: Path, pairs: int = 120) -> Path:
    """A PTB-like corpus (300 / 60 / 60 lines) and a Multi30k-like En-De corpus of `pairs` captions per split."""
    (root / "ptb").mkdir(parents=True)
    for name, n in (("ptb.train.txt", 300), ("ptb.valid.txt", 60), ("ptb.test.txt", 60)):
        (root / "ptb" / name).write_text("".join(f" w{i % 17} w{i % 5} <unk> N w{i % 3}\n" for i in range(n)))
    (root / "multi30k").mkdir()
    en = [f"a man number {i % 9} rides a {['bike', 'horse', 'car'][i % 3]} ." for i in range(pairs)]
    de = [f"ein mann nummer {i % 9} fährt ein {['rad', 'pferd', 'auto'][i % 3]} ." for i in range(pairs)]
    for split in ("train", "val", "test_2016_flickr"):
        for lang, lines in (("en", en), ("de", de)):
            with gzip.open(root / "multi30k" / f"{split}.{lang}.gz", "wt", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
    return root
