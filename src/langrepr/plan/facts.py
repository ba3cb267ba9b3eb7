"""GPU classes (peak TFLOP/s, memory), downloads, and the reader of each dataset's facts (its YAML's `about:` node)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

from langrepr.confpaths import option_files, option_path

GIB = 2**30
RESERVE_GIB = 1.0          # CUDA context, cuBLAS workspace, allocator slack and backward temporaries
DEFAULT_UTILISATION = 0.35
OUT_DIR = Path("outputs/plan")
GPU_JSON_DIR = Path("docs/gpu")

# ---------------------------------------------------------------- GPUs

# Dense (no sparsity) fp16 and bf16 tensor-core peaks with fp32 accumulation, TFLOP/s, from the vendor datasheets
# (sparsity figures halved): the peak an MFU is measured against. Matched against torch.cuda.get_device_name().
PEAK_TFLOPS = [   # (name pattern, label, fp16, bf16, memory GiB)
    (r"H200", "NVIDIA H200", 989.4, 989.4, 141),
    (r"H100.*PCIe", "NVIDIA H100 PCIe", 756.0, 756.0, 80),
    (r"H100", "NVIDIA H100 SXM", 989.4, 989.4, 80),
    (r"A100", "NVIDIA A100", 312.0, 312.0, 80),
    (r"\bL4\b", "NVIDIA L4", 121.0, 121.0, 24),
    (r"\bA10\b", "NVIDIA A10", 125.0, 125.0, 24),
    (r"RTX 4090", "NVIDIA GeForce RTX 4090", 165.2, 165.2, 24),
]
PEAK_SOURCE = ("vendor datasheets, dense tensor-core fp16/bf16 with fp32 accumulate (sparsity figures halved; "
               "RTX 4090: Ada whitepaper, 165.2 with fp32 accumulate)")
GPU_CLASSES = {"rtx4090": "RTX 4090", "a10": "A10", "l4": "L4", "a100": "A100", "h100": "H100", "h200": "H200"}


def peak_for(device_name: str) -> dict | None:
    """Peak fp16/bf16 TFLOP/s and memory of a GPU by name (e.g. torch.cuda.get_device_name()), or None."""
    for pattern, label, fp16, bf16, mem in PEAK_TFLOPS:
        if re.search(pattern, device_name):
            return {"label": label, "fp16": fp16, "bf16": bf16, "memory_gib": mem, "source": PEAK_SOURCE}
    return None


# ---------------------------------------------------------------- data facts (each in its dataset's `about:` node)

# A dataset config whose facts live in another's file (the same official split read two ways)
FACTS_HOME = {"nsmc_style": "nsmc_text"}


@lru_cache(maxsize=None)
def about(dataset: str) -> dict:
    """The `about:` node of a dataset config file ({} when it has none): facts the plan reads, never settings.

    Read from the file alone, not from a composed config: a file that extends another through `defaults` would
    otherwise inherit its parent's facts (mimic50 would take AG News's test size).
    """
    path = option_files("dataset").get(FACTS_HOME.get(dataset, dataset))
    return ((yaml.safe_load(path.read_text()) or {}).get("about") or {}) if path else {}


def size_of(dataset: str) -> dict | None:
    """Training / evaluation sizes the step count needs, in the datamodule's unit, with the file they are kept in."""
    size = about(dataset).get("size")
    return None if size is None else {**size, "file": option_path("dataset", FACTS_HOME.get(dataset, dataset))}


def labels_of(dataset: str) -> int | None:
    """A label count the papers give (the datamodule only knows it after reading the data), or None."""
    labels = about(dataset).get("labels")
    return None if labels is None else int(labels["count"])


def token_list_size(token_list: str) -> int:
    """Multi-hot token-list size: the paper's Table 1 total, kept in the pretraining corpus's config."""
    return int(about("modu_newspaper")["token_list_sizes"][token_list])


# Bit Cipher co-occurrence on 2 CPU cores: Sum, V = 200k, idle machine (docs/bitcipher.md, make bench)
COOCCURRENCE_TOKENS_PER_CPU_S = 1.42e6

# What each table downloads. size/licence "unknown" where no source in the repository or a dataset card gives it.
DOWNLOADS: dict[str, dict] = {
    "uspto": {"what": "USPTO grants 2006-2015, BigQuery export (python -m langrepr.data.patents.uspto export)",
              "size": "unknown (the query scans several hundred GiB of patents-public-data, a few dollars; docs/ewe.md)",
              "licence": "CC BY 4.0 (Google Patents Public Data; shared/data/uspto/SOURCE.md)",
              "gated": "needs a GCP project with BigQuery billing"},
    "ptb": {"what": "PTB word-level (hub ptb-text-only/ptb_text_only or a local copy)",
            "size": "5.1 MB train + 0.4 + 0.45 MB (shared/data/ptb/SOURCE.md)",
            "licence": "LDC-derived, research use (shared/data/ptb/SOURCE.md)", "gated": "no"},
    "wikitext103": {"what": "WikiText-103 (hub Salesforce/wikitext, wikitext-103-v1)",
                    "size": "~312 MB parquet (hub file list)", "licence": "CC BY-SA 3.0 / GFDL (hub card)",
                    "gated": "no"},
    "wmt16": {"what": "WMT16 En-De (hub wmt/wmt16 de-en)", "size": "827 MB download (hub card)",
              "licence": "unknown (hub card: unknown)", "gated": "no"},
    "iwslt16": {"what": "IWSLT En-De (hub IWSLT/iwslt2017 en-de, stand-in for IWSLT16)",
                "size": "16 MB download (hub card, de-en)", "licence": "CC BY-NC-ND 4.0 (hub card)",
                "gated": "no"},
    "babylm10m": {"what": "BabyLM 2024 10M (hub AlienKevin/BabyLM_2024_10M)",
                  "size": "~101 MB parquet (train 33.9 + dev 35.7 + test 31.9 MB; hub file list)",
                  "licence": "unknown (the card states none)", "gated": "no"},
    "ag_news": {"what": "AG News (hub fancyzhx/ag_news)", "size": "~29 MB train.csv (shared/data/agnews/SOURCE.md)",
                "licence": "non-commercial research (the set's readme.txt; shared/data/agnews/SOURCE.md)",
                "gated": "no"},
    "dbpedia": {"what": "DBpedia-14 (hub fancyzhx/dbpedia_14)", "size": "unknown", "licence": "unknown",
                "gated": "no"},
    "yahoo": {"what": "Yahoo! Answers topics (hub community-datasets/yahoo_answers_topics)",
              "size": "319 MB download (hub card)", "licence": "unknown (hub card: unknown)", "gated": "no"},
    "yelp_polarity": {"what": "Yelp polarity (hub fancyzhx/yelp_polarity)", "size": "unknown",
                      "licence": "unknown", "gated": "no"},
    "yelp_full": {"what": "Yelp full (hub Yelp/yelp_review_full)", "size": "unknown", "licence": "unknown",
                  "gated": "no"},
    "nsmc": {"what": "NSMC official split (hub e9t/nsmc)", "size": "unknown (>= 4 MiB; shared/data/nsmc/SOURCE.md)",
             "licence": "CC0 1.0 (shared/data/nsmc/SOURCE.md)", "gated": "no"},
    "mimic50": {"what": "MIMIC-III discharge summaries, 50 codes (CAML split, local LANGREPR_MIMIC_DIR)",
                "size": "unknown", "licence": "PhysioNet credentialed access", "gated": "yes (licence-gated)"},
    "modu_newspaper": {"what": "NIKL MODU newspaper corpus (local export)", "size": "16 GB (multi-hot LM paper §3)",
                       "licence": "NIKL agreement", "gated": "yes (request at corpus.korean.go.kr)"},
    "modu_ner": {"what": "NIKL MODU NER corpus (local JSON)", "size": "unknown", "licence": "NIKL agreement",
                 "gated": "yes (request at corpus.korean.go.kr)"},
    "modu_srl": {"what": "NIKL MODU SRL corpus (local JSON)", "size": "unknown", "licence": "NIKL agreement",
                 "gated": "yes (request at corpus.korean.go.kr)"},
    "korquad": {"what": "KorQuAD v1.0 (hub KorQuAD/squad_kor_v1)", "size": "~38 MB train + 3.9 MB dev "
                "(shared/data/korquad1/SOURCE.md)", "licence": "CC BY-ND 2.0 KR (shared/data/korquad1/SOURCE.md)",
                "gated": "no"},
    "c4": {"what": "C4 en (hub allenai/c4, streamed up to the cell's max_tokens)",
           "size": "streamed; the whole en variant is 305 GB (allenai/c4 README)", "licence": "ODC-BY (hub card)",
           "gated": "no"},
    "conll2003": {"what": "CoNLL-2003 English NER (local copy)", "size": "unknown",
                  "licence": "Reuters RCV1 terms, research only (shared/data/conll2003/SOURCE.md)",
                  "gated": "Reuters corpus agreement for the official build"},
    "gum": {"what": "UD English GUM r2.5 (local copy)", "size": "unknown",
            "licence": "CC BY-NC-SA 4.0 (shared/data/ud_english_gum/SOURCE.md)", "gated": "no"},
}
DATASET_DOWNLOAD = {"nsmc_text": "nsmc", "nsmc_style": "nsmc"}   # dataset config name -> DOWNLOADS key
