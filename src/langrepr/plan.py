"""Cost plan of a profile before any GPU is paid for: `python -m langrepr.plan [--profile full] [--table T]`.

For every cell of a table's sweep (expanded as Hydra's basic sweeper expands `hydra.sweeper.params`, each cell
composed with `hydra.compose` and validated as `python -m langrepr.train` validates it) the plan lists what the
cell trains: parameters, training examples, FLOPs per optimiser step, steps, projected GPU time at a stated
sustained throughput, and peak memory under fp16 mixed precision with "fits 24 GB" and the gradient accumulation
that fits. Non-gradient cells (reference rows, token-list counts, Bit Cipher co-occurrence and probes) are listed
with their CPU nature and no GPU time. Writes `outputs/plan/<table>.{md,json}` and `outputs/plan/all.md`.

How each number is made (also printed in every plan):
- FLOPs: `torch.utils.flop_counter.FlopCounterMode` over one forward + backward of the real network built from
  the cell's config, on random inputs of the real shapes at batch 1 (SDPA through its math backend so that its
  matmuls are visible), scaled linearly to the cell's batch. Matmul-like ops only, 2 FLOPs per multiply-add;
  elementwise ops, the optimiser update and data loading are not counted. LSTM layers (no counter formula for
  the fused RNN kernels) are counted by hand: 2 x gates x (input + hidden) x hidden per token and direction,
  backward twice that.
- GPU time per optimiser step: the larger of FLOP time (FLOPs per step / (peak x utilisation)) and the measured
  per-step floor of that kind of cell (masked_lm, hf_classifier, causal_lm, ...: the fp16 step time a GPU check
  measured for it, `docs/gpu/gpu_check_*.json` from `scripts/gpu_check.py`; kernel launches, memory-bound ops and
  the optimiser bind a small cell, not its FLOPs). Validation and test batches pay the same per-batch floor
  (the check times no forward-only batch: an upper bound for them) or their forward FLOPs, whichever is larger.
  Each stage says which term bound it. Peak = dense fp16/bf16 tensor-core TFLOP/s of the GPU class; utilisation
  = `--utilisation`, else the highest fp16 MFU measured on that GPU (what a FLOP-bound cell sustains; that cell
  sets no floor of its kind), else 35%.
  A GPU class with no check borrows utilisation and floors from the measured GPU nearest in peak, and says so; a
  kind no check measured borrows a kind of the same layers or the smallest floor (a lower bound).
- Packing (`--pack N`): N cells sharing one GPU each step slower by the slowdown measured with that many cells
  side by side (`docs/gpu/packed_*.json`, linear between 1 and the measured count), and the GPU time of each is
  divided by N.
- Memory (AMP, `torch.autocast` fp16 + GradScaler, AdamW/Adam): fp32 master weights 4 B/param + the fp16 copies
  autocast caches 2 B/param + fp32 gradients 4 B/param + optimiser moments 8 B/param + activations. Activations =
  the tensors saved for backward (`torch.autograd.graph.saved_tensors_hooks`, parameters excluded, each storage
  once; SDPA as the GPU's fused kernels save it: q, k, v, output, log-sum-exp) at batch 1 on CPU in fp32, floating-point ones halved (autocast runs matmuls in fp16; LayerNorm and
  softmax keep fp32 there, so this is the low end), times the batch. Temporaries of the backward pass and the
  CUDA context are covered by a 1 GiB reserve. Fits when the sum is within the card's memory less that reserve.
- Accumulation: the fewest steps k (k divides the batch) whose micro-batch batch/k fits.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import re
import time
import unittest.mock
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


# ---------------------------------------------------------------- data facts (sizes with their sources)

def _zhang_sizes(name: str, train: int, test: int) -> dict:
    """A Zhang et al. 2015 classification set: documents, 5% of train held out for validation."""
    return {"unit": "documents", "train": train, "test": test, "val_fraction": 0.05,
            "source": f"Zhang et al. 2015 (conf/dataset/{name}.yaml)"}


# Training / evaluation sizes the step count needs, in the datamodule's unit. None = no source gives it.
SIZES: dict[str, dict] = {
    "uspto": {"unit": "documents", "train": 1_900_000, "test": 150_000, "val_fraction": 0.05,
              "source": "train: EWE paper Table 2 ('Raw 1.9M'); test: the export's two halves of 2015, ~150k "
                        "(issue 23; the paper tests on 14.5k + 15.4k)"},
    "ptb": {"unit": "tokens", "train": 929_589, "val": 73_760, "test": 82_430, "vocab": 10_002,
            "source": "Mikolov PTB counts with <eos> (shared/data/ptb/SOURCE.md); vocabulary 10k words + 2 specials"},
    "wikitext103": {"unit": "tokens", "train": 103_227_021, "val": 217_646, "test": 245_569, "vocab": 267_737,
                    "source": "Merity et al. 2016, Table 1 (vocabulary 267,735 + 2 specials)"},
    "babylm10m": {"unit": "tokens", "train": 10_000_000, "vocab": 32_768,
                  "source": "BabyLM strict-small: 10M words (the set's name); vocabulary cap of the config"},
    "wmt16": {"unit": "sentence pairs", "train": 4_548_885, "val": 2_169, "test": 2_999,
              "source": "HF card wmt/wmt16 de-en"},
    "iwslt16": {"unit": "sentence pairs", "train": 206_000, "val": 888, "test": 8_079,
                "source": "HF iwslt2017 en-de viewer (~206k / 888 / 8,079; the paper's IWSLT16: 197k pairs)"},
    "ag_news": _zhang_sizes("ag_news", 120_000, 7_600),
    "dbpedia": _zhang_sizes("dbpedia", 560_000, 70_000),
    "yahoo": _zhang_sizes("yahoo", 1_400_000, 60_000),
    "yelp_polarity": _zhang_sizes("yelp_polarity", 560_000, 38_000),
    "yelp_full": _zhang_sizes("yelp_full", 650_000, 50_000),
    "nsmc": {"unit": "reviews", "train": 150_000, "test": 50_000, "val_fraction": 0.05,
             "source": "official split (multi-hot LM paper §3; conf/dataset/nsmc_text.yaml)"},
    "conll2003": {"unit": "sentences", "train": 14_041, "val": 3_250, "test": 3_453,
                  "source": "CoNLL-2003 English eng.train / testa / testb sentences (Tjong Kim Sang & De Meulder 2003)"},
    "mimic50": {"unit": "notes", "train": None, "labels": 50,
                "source": "unknown: no split size is recorded in the repository or the LEAM paper"},
}
# Runtime label counts (the datamodule passes them after reading data) known from the papers
LABELS = {"uspto": (1328, "664 CPC subclasses x {First, Later}, EWE §5.3"), "mimic50": (50, "50 ICD-9 codes"),
          "conll2003": (9, "IOB2 tags: O + B-/I- of PER, LOC, ORG, MISC")}
# Multi-hot token-list sizes: the paper's Table 1 totals (conf/dataset/modu_newspaper.yaml)
TOKEN_LISTS = {"bpe_base": 37_027, "bpe_syllable": 20_892, "dict_syllable": 37_822}
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


# ---------------------------------------------------------------- a network step, rebuilt from the config

@dataclass
class Workload:
    """One network's training step: the `_target_` node, its runtime kwargs and the input shapes (random ids)."""

    kind: str            # hf_classifier | text_classifier | masked_lm | seq2seq | causal_lm | multihot_mlm | multihot_encoder
    net: Any
    net_kwargs: dict
    shape: dict

    def build(self):
        from hydra.utils import instantiate

        return instantiate(self.net, **self.net_kwargs)

    def key(self) -> str:
        from omegaconf import OmegaConf

        node = OmegaConf.to_container(self.net, resolve=True) if OmegaConf.is_config(self.net) else self.net
        return json.dumps([self.kind, node, self.net_kwargs, self.shape], sort_keys=True, default=str)

    def inputs(self, batch: int, device: Any, generator: Any) -> dict:
        """Random inputs of the real shapes and vocabulary (no data files)."""
        import torch

        s, rand = self.shape, lambda *size: torch.randint(5, max(6, self.shape.get("vocab", 6)), size, generator=generator)
        if self.kind == "hf_classifier":
            from langrepr.benchmarking import random_batch

            out = random_batch(s, batch, s["labels"], generator)
        elif self.kind == "grid_classifier":   # the grid's input x encoder: ids in the input's shape
            ids = rand(batch, *s["ids"])
            if s.get("pos_tags"):                 # multi-hot groups: column 0 is the POS tag id
                ids[..., 0] = torch.randint(0, s["pos_tags"], ids.shape[:-1], generator=generator)
            labels = ((torch.rand(batch, s["labels"], generator=generator) < 0.05).float() if s["multilabel"]
                      else torch.randint(0, s["labels"], (batch,), generator=generator))
            out = {"input_ids": ids, "attention_mask": torch.ones(batch, s["ids"][0], dtype=torch.long),
                   "labels": labels}
        elif self.kind == "text_classifier":
            ids = rand(batch, s["length"])
            labels = ((torch.rand(batch, s["labels"], generator=generator) < 0.05).float() if s["multilabel"]
                      else torch.randint(0, s["labels"], (batch,), generator=generator))
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        elif self.kind == "masked_lm":
            ids = rand(batch, s["length"])
            select = torch.rand(batch, s["length"], generator=generator) < s.get("mask_prob", 0.15)
            select[:, 0] = True
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "select": select,
                   "labels": ids[select]}
        elif self.kind == "seq2seq":
            src, tgt = rand(batch, s["source"]), rand(batch, s["target"])
            out = {"input_ids": src, "attention_mask": torch.ones_like(src), "decoder_input_ids": tgt,
                   "decoder_attention_mask": torch.ones_like(tgt), "labels": rand(batch, s["target"])}
        elif self.kind == "causal_lm":
            ids = rand(batch, s["length"])
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        else:   # multihot_mlm | multihot_encoder: every group slot filled (the widest batch a list allows)
            ids = rand(batch, s["length"], s["group"])
            out = {"ids": ids, "group_mask": torch.ones_like(ids, dtype=torch.bool),
                   "pos": torch.randint(0, s["pos_tags"], (batch, s["length"]), generator=generator),
                   "attention_mask": torch.ones(batch, s["length"], dtype=torch.long)}
            if self.kind == "multihot_mlm":
                masked = torch.rand(batch, s["length"], generator=generator) < 0.15
                masked[:, 1] = True
                out.update(masked=masked, target_ids=ids[masked], target_mask=out["group_mask"][masked])
        return {k: v.to(device) for k, v in out.items()}

    def loss(self, net: Any, x: dict):
        """The task's loss on the network's output (a surrogate where only a one-layer head is missing)."""
        import torch.nn.functional as F

        if self.kind == "hf_classifier":
            return F.binary_cross_entropy_with_logits(net(input_ids=x["input_ids"], attention_mask=x["attention_mask"])
                                                      .float(), x["labels"])
        if self.kind in ("text_classifier", "grid_classifier"):
            logits = net(x["input_ids"], x["attention_mask"]).float()
            loss = (F.binary_cross_entropy_with_logits(logits, x["labels"]) if self.shape["multilabel"]
                    else F.cross_entropy(logits, x["labels"]))
            if hasattr(net, "label_logits") and getattr(net, "label_penalty", 0):   # LEAM eq. (9)
                import torch

                target = torch.arange(self.shape["labels"], device=logits.device)
                loss = loss + net.label_penalty * F.cross_entropy(net.label_logits().float(), target)
            return loss
        if self.kind == "masked_lm":
            return F.cross_entropy(net(x["input_ids"], x["attention_mask"], x["select"]).float(), x["labels"])
        if self.kind == "seq2seq":
            logits = net(x["input_ids"], x["attention_mask"], x["decoder_input_ids"], x["decoder_attention_mask"])
            return F.cross_entropy(logits.flatten(0, 1).float(), x["labels"].flatten(), label_smoothing=0.1)
        if self.kind == "causal_lm":
            logits = net(x["input_ids"], x["attention_mask"])
            return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x["input_ids"][:, 1:].flatten())
        hidden = net(x["ids"], x["group_mask"], x["pos"], x["attention_mask"])
        if self.kind == "multihot_mlm":
            from langrepr.models.multihot_losses import mlm_loss

            logits = net.mlm_logits(hidden[x["masked"]]).float()
            return mlm_loss(self.shape.get("loss", "mhsce"), logits, x["target_ids"], x["target_mask"],
                            **self.shape.get("loss_options", {}))
        return hidden.float().pow(2).mean()   # fine-tuning heads are one linear layer: the encoder is the cost


@dataclass
class Stage:
    """A gradient stage of a cell: a workload at a batch for a number of optimiser steps."""

    name: str
    work: Workload
    batch: int
    steps: int | None
    steps_note: str
    examples: str
    optimizer: str = "AdamW"
    precision: str = "16-mixed"
    eval_forwards: int = 0          # examples run forward-only for validation and test
    eval_batches: int = 0           # the batches they make (each pays the per-step floor, as a training step does)
    eval_note: str = ""
    share_key: str = ""             # stages with one key train once (multi-hot pretraining)
    batch_setting: str = "dataset.datamodule.batch_size"
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- sweep -> cells

def sweep_cells(experiment: str, profile: str, extra: list[str] = ()) -> list[list[str]]:
    """The override list of every job `-m experiment=E profile=P [extra]` runs, as Hydra's basic sweeper builds them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = compose([f"experiment={experiment}", f"profile={profile}", *extra], hydra=True)
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + [f"experiment={experiment}", f"profile={profile}",
                                                                   *extra])
    return BasicSweeper.split_arguments(overrides, None)[0]


def compose(overrides: list[str], hydra: bool = False) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import langrepr.train  # noqa: F401  (registers the config resolvers)
    from langrepr.confpaths import CONF_DIR

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose("train", overrides=overrides, return_hydra_config=hydra)


def compose_cell(overrides: list[str]) -> tuple[Any, list[str]]:
    """(validated config, findings) of one cell.

    A key the sweep sets without '+' that no file declares is retried with '+' (so the plan can still cost the
    cell) and reported: `make` would refuse that cell.
    """
    from langrepr.validation import validate_config

    findings = []
    try:
        cfg = compose(overrides, hydra=True)
    except Exception as err:  # noqa: BLE001  (Hydra's composition errors: reported, retried below)
        missing = re.search(r"Could not override '([^']+)'", str(err))
        if not missing:
            raise
        findings.append(f"does not compose: '{missing.group(1)}' is set by the sweep but declared by no config "
                        f"file of this profile (`make` refuses it); planned with +{missing.group(1)}")
        overrides = [f"+{o}" if o.split("=", 1)[0] == missing.group(1) else o for o in overrides]
        cfg = compose(overrides, hydra=True)
    validate_config(cfg, {k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None})
    return cfg, findings


def cell_name(overrides: list[str]) -> str:
    return ",".join(o for o in overrides if not o.startswith(("experiment=", "profile=")))


# ---------------------------------------------------------------- cell -> stages

def _sel(cfg: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=default)


def dataset_name(cfg: Any) -> str:
    return str(cfg.hydra.runtime.choices.get("dataset") or _sel(cfg, "dataset.datamodule.name") or "")


def data_needs(cfg: Any) -> set[str]:
    """DOWNLOADS keys the cell reads."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "count" or target.endswith("time_training_iterations"):
        return set()
    if target.endswith("probe_cell"):
        return {"c4", "conll2003", "gum"}
    if ".korean." in target or "multihot" in target or "span_qa" in target:
        needs = {"modu_newspaper", "korquad"}
        task = _sel(cfg, "downstream")
        if target.endswith("downstream_pipeline") and task in ("ner", "srl"):
            needs.add(f"modu_{task}")
        if target.endswith("downstream_pipeline") and task == "nsmc":
            needs.add("nsmc")
        return needs
    name = DATASET_DOWNLOAD.get(dataset_name(cfg), dataset_name(cfg))
    needs = {name} if name in DOWNLOADS else set()
    task = _sel(cfg, "downstream")       # a multi-hot fine-tuning train cell reads its task's data too
    if task is not None:
        needs.add({"korquad": "korquad", "ner": "modu_ner", "srl": "modu_srl", "nsmc": "nsmc"}.get(str(task), ""))
    elif str(_sel(cfg, "dataset.datamodule._target_", "")).endswith("KorQuADDataModule"):
        needs.add("korquad")
    return needs & set(DOWNLOADS)


def cpu_nature(cfg: Any) -> str:
    """What a non-gradient cell does (no GPU time)."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "count":
        return "parameter count of the model built from config (CPU, seconds)"
    if stage == "stats":
        return "label statistics of the data (CPU)"
    leaf = target.rsplit(".", 1)[-1]
    if leaf == "probe_cell":
        kind = str(_sel(cfg, "bitcipher_vectors.kind", "?"))
        tokens = _sel(cfg, "bitcipher.corpus.max_tokens")
        work = {"sum": "co-occurrence", "cat": "co-occurrence"}.get(kind)
        text = (f"Bit Cipher vectors '{kind}' over up to {tokens:,} corpus tokens (built once, shared by the seeds)"
                if tokens else f"Bit Cipher vectors '{kind}'")
        if work:
            text += f", {work} ~{tokens / COOCCURRENCE_TOKENS_PER_CPU_S / 3600:,.1f} CPU-hours at 1.42M tokens per " \
                    "CPU-second (docs/bitcipher.md; tokenisation excluded)"
        return text + " + POS/NER MLP probe on CPU (1 thread)"
    return {"label_prior": "reference row: label prior (CPU)", "majority_class": "reference row: majority class (CPU)",
            "bow_logistic_regression": "reference row: bag-of-words logistic regression (scikit-learn, CPU)",
            "tfidf_probe": "reference row: TF-IDF + logistic regression (scikit-learn, CPU)",
            "masked_unigram_nll": "reference row: unigram NLL of the masked tokens (CPU counts)",
            "copy_source_bleu": "reference row: BLEU of copying the source (CPU)",
            "causal_unigram_ppl": "reference row: unigram perplexity (CPU counts)",
            "table1_pipeline": "token-list sizes: Kiwi morpheme analysis of the corpus + list building (CPU)",
            "korquad_answer_pipeline": "KorQuAD answers divided / not divided per token list (CPU counts)",
            }.get(leaf, f"pipeline {target} (CPU)")


def stages(cfg: Any) -> list[Stage]:
    """The gradient stages of a cell ([] for a non-gradient cell)."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "train":
        return [train_stage(cfg)]
    if target.endswith(("downstream_pipeline", "korquad_finetune_pipeline", "pretrain_pipeline")):
        return multihot_stages(cfg, target)
    if target.endswith("time_training_iterations"):
        p = cfg.pipeline
        work = Workload("text_classifier", cfg.model.net, {"vocab_size": int(p.vocab_size), "num_labels": int(p.num_labels)},
                        {"length": int(p.length), "vocab": int(p.vocab_size), "labels": int(p.num_labels),
                         "multilabel": False})
        return [Stage("timing", work, int(p.batch_size), int(p.iterations) + int(p.warmup), "iterations + warm-up",
                      "random ids", optimizer="Adam", precision="32 (plain fp32, no autocast)",
                      notes=["Table 4 times fp32 steps on whatever device it finds"])]
    return []


def _steps(cfg: Any, batch: int, train_units: int | None) -> tuple[int | None, str, float | None]:
    """(optimiser steps, how they were read, epochs) from the trainer config and the training set size."""
    max_steps, max_epochs = int(_sel(cfg, "trainer.max_steps", -1) or -1), int(_sel(cfg, "trainer.max_epochs", -1) or -1)
    accumulate = int(_sel(cfg, "trainer.accumulate_grad_batches", 1) or 1)
    per_epoch = math.ceil(train_units / batch / accumulate) if train_units else None
    if max_epochs > 0 and per_epoch:
        by_epochs = max_epochs * per_epoch
        if 0 < max_steps < by_epochs:
            return max_steps, f"max_steps {max_steps:,} (before {max_epochs} epochs)", max_steps / per_epoch
        return by_epochs, f"{max_epochs} epochs x {per_epoch:,} steps", float(max_epochs)
    if max_steps > 0:
        return max_steps, f"max_steps {max_steps:,}", (max_steps / per_epoch if per_epoch else None)
    return None, f"{max_epochs} epochs x unknown steps per epoch (training-set size unknown)", None


def _eval_forwards(cfg: Any, size: dict, steps: int | None, epochs: float | None, units_per_example: int,
                   batch: int = 1) -> tuple[int, str, int]:
    """(examples run forward-only, how, batches): validation passes (the trainer's schedule) plus one test pass.

    Batches count apart from examples because a small cell's evaluation is bound by its per-batch time, not FLOPs.
    """
    cap = _sel(cfg, "dataset.datamodule.max_eval_samples")
    train = size.get("train")
    val = size.get("val")
    if val is None and train and size.get("val_fraction"):
        val = int(train * size["val_fraction"])
    val = None if val is None else val // units_per_example
    test = None if size.get("test") is None else size["test"] // units_per_example
    if cap:   # a split of unknown size is taken to reach the cap (the cap is what an evaluation reads)
        val, test = (int(cap) if val is None else min(val, int(cap))), (int(cap) if test is None else min(test, int(cap)))
    interval, every = _sel(cfg, "trainer.val_check_interval"), _sel(cfg, "trainer.check_val_every_n_epoch", 1)
    if steps is None:
        return 0, "not projected (steps unknown)", 0
    if isinstance(interval, int) and interval > 1 and not isinstance(interval, bool):
        passes = steps // interval
    elif epochs is not None:
        passes = int(epochs / (float(interval) if interval else 1.0) / (every or 1))
    else:
        passes = 0
    forwards = passes * (val or 0) + (test or 0)
    batches = passes * math.ceil((val or 0) / batch) + math.ceil((test or 0) / batch)
    return forwards, (f"{passes:,} validations x {val or 0:,} + test {test or 0:,}"
                      + ("" if val is not None and test is not None else " (a split size is unknown: not counted)")), batches


def train_stage(cfg: Any) -> Stage:
    """A `stage: train` cell (Lightning Trainer, `trainer.precision`)."""
    from hydra.utils import get_class

    dataset = dataset_name(cfg)
    dm = cfg.dataset.datamodule
    cls = get_class(cfg.model.net._target_).__name__
    batch = int(dm.batch_size)
    size = SIZES.get(DATASET_DOWNLOAD.get(dataset, dataset), {"unit": "?", "train": None, "source": "unknown"})
    train = size.get("train")
    if train and size.get("val_fraction"):
        train = int(train * (1 - size["val_fraction"]))
    cap = dm.get("max_train_samples")
    capped = bool(train and isinstance(cap, int) and cap < train)
    if capped:              # the datamodule keeps only its first `max_train_samples` (e.g. the grid's quick NER)
        train = cap
    units_per_example = 1
    if cls == "HFSequenceClassifier":
        tok = cfg.model.tokenizer
        labels = LABELS.get(dataset, (int(_sel(cfg, "count_net_kwargs.num_labels", 1328)), ""))[0]
        shape = {"u": tok.get("u", tok.get("max_length")), "v": tok.get("v", 1), "labels": labels,
                 "vocab": tok.get("vocab_size", 0x10FFFF if "Codepoint" in tok._target_ else 256),
                 "bytes": "Byte" in tok._target_}
        work = Workload("hf_classifier", cfg.model.net, {"num_labels": labels}, shape)
    elif cls in ("LEAM", "SWEM", "KimCNN", "BiLSTM"):
        tok = cfg.model.tokenizer
        labels = (LABELS[dataset][0] if dataset in LABELS else len(dm.class_names or []))
        multilabel = bool(dm.get("multilabel", False)) or dataset == "uspto"
        vocab = int(tok.max_vocab)
        work = Workload("text_classifier", cfg.model.net, {"vocab_size": vocab, "num_labels": labels},
                        {"length": int(tok.max_length), "vocab": vocab, "labels": labels, "multilabel": multilabel})
    elif cls == "GridModel":      # the grid (issue 24): an input x an encoder (langrepr.models.grid)
        work = grid_workload(cfg, dataset)
    elif cls == "MaskedLMModel":
        n, vocab = int(dm.seq_len), size["vocab"]
        units_per_example = n
        work = Workload("masked_lm", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "max_len": n,
                                                     "flops_seq_len": n},
                        {"length": n, "vocab": vocab, "mask_prob": float(cfg.dataset.task.mask_prob)})
    elif cls == "CausalTransformerLM":
        n, vocab = int(dm.seq_len), int(dm.get("max_vocab") or size["vocab"])
        units_per_example = n
        work = Workload("causal_lm", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "max_len": n},
                        {"length": n, "vocab": vocab})
    elif cls == "Seq2SeqModel":
        src, tgt, vocab = int(dm.max_source_len), int(dm.max_target_len), int(dm.vocab_size)
        work = Workload("seq2seq", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "bos_token_id": 1,
                                                   "eos_token_id": 2, "max_len": max(src, tgt) + 1,
                                                   "flops_seq_len": src},
                        {"source": src, "target": tgt, "vocab": vocab})
    elif cls == "MultiHotLM":     # multi-hot pretraining or fine-tuning as a train cell
        work, size = multihot_train_workload(cfg)
    else:
        raise ValueError(f"the plan does not know how to feed {cfg.model.net._target_}")
    train_examples = train // units_per_example if train else None
    steps, note, epochs = _steps(cfg, batch, train_examples)
    forwards, eval_note, eval_batches = _eval_forwards(cfg, size, steps, epochs, units_per_example, batch)
    unit = size.get("unit", "?")
    if train:
        examples = (f"{train:,} {unit}" + (" (max_train_samples)" if capped else "")
                    + (f" = {train_examples:,} blocks of {units_per_example}" if units_per_example > 1 else ""))
    elif steps:
        examples = f"{steps * batch:,} {unit} seen (steps x batch; set size unknown)"
    else:
        examples = f"unknown ({size.get('source', '')})"
    notes = []
    if work.kind == "seq2seq":
        notes.append("source/target at the length caps (max_source_len / max_target_len): an upper bound, batches "
                     "pad only to their longest pair; test beam search (beam 5) not counted")
    if work.kind == "text_classifier" and dataset != "uspto" and "max_vocab" in cfg.model.tokenizer:
        notes.append(f"vocabulary at the tokenizer cap ({work.shape['vocab']:,}): an upper bound")
    optimizer = str(cfg.optimizer._target_).rsplit(".", 1)[-1]
    return Stage("train", work, batch, steps, note, examples, optimizer=optimizer,
                 precision=str(_sel(cfg, "trainer.precision", "32")), eval_forwards=forwards, eval_note=eval_note,
                 eval_batches=eval_batches,
                 notes=notes)


def extra_sweeps(table: str, profile: str) -> list[list[str]]:
    """Sweeps a table's make target runs beside its experiment's own (single values: each is composed once).

    The grid (`make grid`): multi-hot inputs on NSMC only, CoNLL-2003 NER under the tagging encoders only, and the
    reference rows (one seed, deterministic).
    """
    if table != "grid":
        return []
    patents = "synthetic" if profile == "quick" else "uspto"
    refs = [(patents, "patent_label_prior"), (patents, "patent_tfidf_probe")] + [
        (task, model) for task in ("ag_news", "nsmc_text") for model in ("majority_class", "bow_lr")] + [
        ("conll2003", "majority_tagger"), ("conll2003", "token_lr")]
    return ([["grid_task=nsmc_text", "input=multihot"]]
            + [["grid_task=conll2003", f"encoder={encoder}"] for encoder in ("tensorcoder", "bert")]
            + [[f"grid_task={task}", "input=none", "encoder=none", f"model={model}", "seed=1"] for task, model in refs])


def grid_workload(cfg: Any, dataset: str) -> Workload:
    """A grid cell's input x encoder at its input's id shape: (L,) token ids, (u, v) EWE materials, (L, 1 + G) groups."""
    from omegaconf import OmegaConf

    node = _sel(cfg, "input.net")
    if node is not None and "vectors_path" in node:   # vectors trained in the cell: a random start costs the same
        OmegaConf.update(cfg, "input.net.vectors_path", None, merge=False)
    tok = cfg.model.tokenizer.inner
    target = str(tok._target_)
    extra: dict = {}
    if "WhitespaceByte" in target or "RawByte" in target:
        ids, vocab = ([int(tok.u), int(tok.v)] if int(tok.v) > 1 else [int(tok.u)]), 256
    elif "MultiHot" in target:
        ids, vocab = [int(tok.max_length), 1 + int(tok.max_group)], int(tok.bpe_size) + int(tok.syllables)
        extra = {"pos_tags": int(cfg.model.net.input.num_pos_tags)}
    else:
        ids, vocab = [int(tok.max_length)], int(tok.get("vocab_size") or tok.get("max_vocab"))
    dm = cfg.dataset.datamodule
    labels = LABELS[dataset][0] if dataset in LABELS else len(dm.get("class_names") or []) or 2
    multilabel = bool(dm.get("multilabel", False)) or dataset in ("uspto", "synthetic")
    return Workload("grid_classifier", cfg.model.net, {"vocab_size": vocab, "num_labels": labels},
                    {"ids": ids, "vocab": vocab, "labels": labels, "multilabel": multilabel, **extra})


def grid_composition(cfg: Any) -> str | None:
    """A grid cell (`model.tokenizer` is the grid's): why it does not compose, else None (`langrepr.grid`)."""
    tok = _sel(cfg, "model.tokenizer")
    if tok is None or not str(tok.get("_target_", "")).endswith("grid_tokenizer"):
        return None
    from omegaconf import OmegaConf

    from langrepr.grid import composition_error

    return composition_error(OmegaConf.to_container(tok.compose, resolve=True))


def multihot_shape(model: Any, token_list: str) -> tuple[int, dict]:
    """Token-list size and input shape of a multi-hot net: every group slot filled, the widest batch a list allows."""
    vocab = TOKEN_LISTS[token_list]
    group = 1 if token_list == "bpe_base" else int(model.max_group)
    return vocab, {"length": int(model.max_positions), "group": group, "vocab": vocab,
                   "pos_tags": int(model.num_pos_tags), "token_list": token_list}


def multihot_train_workload(cfg: Any) -> tuple[Workload, dict]:
    """A multi-hot train cell: MLM pretraining (a PretrainingDataModule) or fine-tuning (the encoder's cost)."""
    dm = cfg.dataset.datamodule
    token_list = str(_sel(cfg, "dataset.datamodule.token_list") or _sel(cfg, "pipeline.token_list"))
    vocab, shape = multihot_shape(cfg.model.net, token_list)
    if str(dm._target_).endswith("PretrainingDataModule"):
        task = cfg.dataset.task
        options = dict(task.get("loss_options") or {}) if str(task.get("loss", "mhsce")) == "mhsce" else {}
        work = Workload("multihot_mlm", cfg.model.net, {"vocab_size": vocab},
                        {**shape, "loss": str(task.get("loss", "mhsce")), "loss_options": options})
        unit = "sequences (from the 16 GB corpus)"
    else:
        work = Workload("multihot_encoder", cfg.model.net, {"vocab_size": vocab}, shape)
        unit = "examples"
    return work, {"unit": unit, "train": None, "source": "step-based (trainer.max_steps)"}


def multihot_stages(cfg: Any, target: str) -> list[Stage]:
    """Pretraining (shared by every cell naming the same config) and fine-tuning of a multi-hot pipeline cell."""
    from omegaconf import OmegaConf

    model, mlm, token_list = cfg.model.net, cfg.mlm, str(cfg.pipeline.token_list)
    vocab, shape = multihot_shape(model, token_list)
    group = shape["group"]
    wired = "32 (the pipeline's own Trainer sets no precision: fp32 on a GPU today)"
    key = json.dumps({"token_list": token_list, "model": OmegaConf.to_container(model, resolve=True),
                      "mlm": OmegaConf.to_container(mlm, resolve=True), "seed": int(cfg.seed),
                      "corpus": OmegaConf.to_container(cfg.dataset.corpus, resolve=True)}, sort_keys=True, default=str)
    pre = Stage("pretrain", Workload("multihot_mlm", model, {"vocab_size": vocab},
                                     {**shape, "loss": str(mlm.loss),
                                      "loss_options": OmegaConf.to_container(mlm.get("loss_options") or {}) if mlm.loss == "mhsce" else {}}),
                int(mlm.batch_size), int(mlm.steps), f"mlm.steps {int(mlm.steps):,}",
                f"{int(mlm.steps) * int(mlm.batch_size):,} sequences of {shape['length']} positions from the 16 GB "
                "corpus", precision=wired, share_key=f"multihot-pretrain-{key}", batch_setting="mlm.batch_size",
                notes=[f"token list {token_list} ({vocab:,} tokens, paper Table 1); group slots {group} (every slot "
                       "filled: the widest batch the list allows)" + ("; NSP head not counted (2 outputs)" if mlm.get("nsp") else "")])
    if target.endswith("pretrain_pipeline"):
        return [pre]
    task = str(cfg.downstream) if target.endswith("downstream_pipeline") else "korquad"
    ft = cfg.finetune[task] if target.endswith("downstream_pipeline") else cfg.finetune
    tune = Stage(f"fine-tune {task}", Workload("multihot_encoder", model, {"vocab_size": vocab}, shape),
                 int(ft.batch_size), int(ft.steps), f"finetune steps {int(ft.steps):,}",
                 f"{int(ft.steps) * int(ft.batch_size):,} examples at {shape['length']} positions (upper bound)",
                 precision=wired,
                 batch_setting=f"finetune.{task}.batch_size" if target.endswith("downstream_pipeline") else "finetune.batch_size",
                 notes=["fine-tuning at max_positions: an upper bound (batches pad to their longest example)"])
    return [pre, tune]


# ---------------------------------------------------------------- measuring one workload at batch 1 on CPU

_MEASURED: dict[str, dict] = {}


def measure(work: Workload) -> dict:
    """Parameters, FLOPs of one forward + backward and of one forward, and saved-activation bytes, at batch 1."""
    key = work.key()
    if key in _MEASURED:
        return _MEASURED[key]
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    net = work.build().train()
    params = sum(p.numel() for p in net.parameters())
    x = work.inputs(1, torch.device("cpu"), generator)
    acts = saved_activation_bytes(net, functools.partial(work.loss, net, x))
    net.zero_grad(set_to_none=True)
    rnn: list[int] = []
    hooks = [m.register_forward_hook(lambda mod, args, out: rnn.append(rnn_flops(mod, args[0])))
             for m in net.modules() if isinstance(m, torch.nn.RNNBase)]
    with sdpa_kernel(SDPBackend.MATH):          # the fused CPU kernel is invisible to the counter
        with FlopCounterMode(display=False) as fwd:
            loss = work.loss(net, x)
        with FlopCounterMode(display=False) as bwd:
            loss.backward()
    for h in hooks:
        h.remove()
    forward = fwd.get_total_flops() + sum(rnn)
    result = {"params": params, "fwd_flops": forward, "step_flops": forward + bwd.get_total_flops() + 2 * sum(rnn),
              "rnn_flops_analytic": sum(rnn), **acts}
    del net, x, loss, fwd, bwd
    gc.collect()
    _MEASURED[key] = result
    return result


def rnn_flops(module: Any, x: Any) -> int:
    """Forward FLOPs of an LSTM / GRU / RNN call, by hand: FlopCounterMode has no formula for the fused RNN kernels.

    Per token, direction and layer: 2 x gates x (input + hidden) x hidden (the input and recurrent matmuls);
    backward is taken as twice that (the same matmuls for input and weight gradients).
    """
    tokens = x.data.shape[0] if hasattr(x, "batch_sizes") else x.shape[0] * x.shape[1]
    gates = {"LSTM": 4, "GRU": 3}.get(module.mode, 1)
    dirs = 2 if module.bidirectional else 1
    total = 0
    for layer in range(module.num_layers):
        width = module.input_size if layer == 0 else module.hidden_size * dirs
        total += 2 * gates * (width + module.hidden_size) * module.hidden_size * tokens * dirs
    return total


def saved_activation_bytes(net: Any, forward: Any) -> dict:
    """Bytes of the tensors autograd saves for backward in one forward (parameters excluded, each storage once)."""
    import torch

    param_storages = {p.untyped_storage().data_ptr() for p in net.parameters()}
    storages: dict[int, tuple[int, bool]] = {}
    alive: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> int:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_storages and t.device.type != "meta":
            storages[ptr] = (t.untyped_storage().nbytes(), t.is_floating_point())
        alive.append(t)   # as the graph would (no address reused); the graph itself keeps only the int, since
        return ptr        # a tensor returned here would hold a parameter in a C++ reference cycle

    def unpack(_: int) -> None:
        raise RuntimeError("saved_activation_bytes runs a forward only")

    sdpa = torch.nn.functional.scaled_dot_product_attention

    def fused_sdpa(query, key, value, *args, **kwargs):
        """SDPA as a GPU's fused kernels keep it for backward: q, k, v, the output and the log-sum-exp.

        On a GPU attention dropout is replayed from the RNG state; on a CPU it sends SDPA to its math path, which
        saves the N x N weights. So the call runs without autograd here and its saved tensors are added by hand.
        """
        with torch.no_grad():
            out = sdpa(query, key, value, *args, **kwargs)
        for t in (query, key, value, out):
            pack(t)
        storages[-len(storages) - 1] = (out[..., 0].numel() * 4, True)    # fp32 log-sum-exp per query and head
        return out.requires_grad_(query.requires_grad or key.requires_grad or value.requires_grad)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack), \
            unittest.mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", fused_sdpa):
        loss = forward()
    del loss
    alive.clear()
    floating = sum(n for n, f in storages.values() if f)
    other = sum(n for n, f in storages.values() if not f)
    return {"act_fp32_bytes": floating + other, "act_fp16_bytes": floating // 2 + other}


# ---------------------------------------------------------------- projection

def memory_bytes(params: int, act_per_example: int, micro_batch: int, optimizer: str = "AdamW",
                 mixed: bool = True) -> dict:
    """Peak memory of AMP training: fp32 weights + fp16 autocast copies + fp32 grads + 2 moments + activations."""
    moments = 8 if optimizer.lower().startswith("adam") else 0
    out = {"weights_fp32": 4 * params, "weights_fp16_copy": 2 * params if mixed else 0, "gradients": 4 * params,
           "optimizer": moments * params, "activations": act_per_example * micro_batch}
    out["total"] = sum(out.values())
    return out


def accumulation(params: int, act_per_example: int, batch: int, budget: float, optimizer: str = "AdamW",
                 mixed: bool = True) -> tuple[int | None, int | None]:
    """(accumulation steps k, micro-batch batch/k): the fewest k dividing the batch that fit the budget."""
    for k in range(1, batch + 1):
        if batch % k == 0 and memory_bytes(params, act_per_example, batch // k, optimizer, mixed)["total"] <= budget:
            return k, batch // k
    return None, None


# A kind of cell no GPU check measured borrows the floor of the kind that runs the same layers; any other kind
# takes the smallest floor measured on that GPU (a lower bound, said in the stage's row).
FLOOR_FROM_KIND = {"seq2seq": "masked_lm"}


@dataclass
class GpuCheck:
    """What one GPU check (`scripts/gpu_check.py`) and the packed runs beside it measured on one GPU class."""

    label: str
    file: str
    peak_fp16: float
    utilisation: float                     # the highest fp16 MFU of its cells: what a FLOP-bound cell sustains
    utilisation_cell: str
    floors: dict[str, float]               # kind -> fp16 seconds per optimiser step (mean over that kind's cells)
    floor_cells: dict[str, list[str]]
    packed: dict | None = None             # {"n", "slowdown", "kind", "file", "per_cell"}


def _packed_slowdown(record: dict, check: dict, name: str) -> dict | None:
    """How much slower each cell stepped with `cells_sharing` cells on the GPU than alone (same cell, measured).

    Per cell: seconds / ((steps + validations x val_batches) x its alone step time), every batch priced as the
    plan prices it; the mean over the cells that were also measured alone.
    """
    alone = {row: cell["fp16"]["step_s"] for cells in (check.get("papers") or {}).values()
             for row, cell in cells.items() if (cell.get("fp16") or {}).get("step_s")}
    per_cell = {}
    for row, c in (record.get("cells") or {}).items():
        if row in alone:
            batches = c["steps"] + c["validations"] * record["val_batches"]
            per_cell[row] = record["seconds"] / (batches * alone[row])
    if not per_cell or int(record.get("cells_sharing", 0)) < 2:
        return None
    return {"n": int(record["cells_sharing"]), "slowdown": sum(per_cell.values()) / len(per_cell),
            "kind": record.get("kind"), "file": name, "per_cell": per_cell}


def load_checks(gpu_dir: Path = GPU_JSON_DIR) -> dict[str, GpuCheck]:
    """GPU label -> what its committed checks measured (`docs/gpu/gpu_check_*.json`, `packed_*.json`); --small ignored."""
    records = []
    for path in sorted(gpu_dir.glob("*.json")) if gpu_dir.is_dir() else []:
        try:
            records.append((path.name, json.loads(path.read_text())))
        except (OSError, json.JSONDecodeError):
            continue
    checks: dict[str, GpuCheck] = {}
    raw: dict[str, dict] = {}
    for name, record in records:
        peak = peak_for(str(record.get("device_name", "")))
        if record.get("small") or record.get("name") == "packed_run" or not peak:
            continue
        timed = [(f"{paper}/{row}", cell["kind"], cell["fp16"]) for paper, rows in (record.get("papers") or {}).items()
                 for row, cell in rows.items() if (cell.get("fp16") or {}).get("step_s") and cell.get("kind")]
        best, best_cell = max(((float(f.get("mfu") or 0), name) for name, _, f in timed), default=(0.0, ""))
        floors: dict[str, list[float]] = {}
        cells: dict[str, list[str]] = {}
        for name, kind, fp16 in timed:
            if name == best_cell:   # FLOP-bound: its step time is the FLOP term's, not a floor of its kind
                continue
            floors.setdefault(kind, []).append(float(fp16["step_s"]))
            cells.setdefault(kind, []).append(name)
        if floors:
            checks[peak["label"]] = GpuCheck(peak["label"], name, peak["fp16"], best, best_cell,
                                             {k: sum(v) / len(v) for k, v in sorted(floors.items())}, cells)
            raw[peak["label"]] = record
    for name, record in records:
        peak = peak_for(str(record.get("device_name", "")))
        if record.get("name") == "packed_run" and peak and peak["label"] in checks:
            checks[peak["label"]].packed = _packed_slowdown(record, raw[peak["label"]], name)
    return checks


@dataclass
class Assumption:
    """The GPU class, the sustained share of its peak, the measured per-step floors and how many cells share it."""

    gpu: str
    label: str
    peak_tflops: float
    memory_gib: float
    utilisation: float
    source: str
    floors: dict = field(default_factory=dict)    # kind -> seconds per step (alone on the GPU)
    floor_source: str = "no GPU check in docs/gpu/: no per-step floor, FLOP time only (a lower bound)"
    pack: int = 1
    slowdown: float = 1.0                         # per-step slowdown of one cell when `pack` share the GPU
    pack_source: str = ""

    @property
    def sustained(self) -> float:
        return self.peak_tflops * self.utilisation * 1e12

    @property
    def budget(self) -> float:
        return (self.memory_gib - RESERVE_GIB) * GIB

    def floor_for(self, kind: str) -> tuple[float | None, str]:
        """(seconds per step, where it comes from) of a kind of cell alone on the GPU; (None, why) without a check."""
        if kind in self.floors:
            return self.floors[kind], f"{kind} measured"
        if FLOOR_FROM_KIND.get(kind) in self.floors:
            return self.floors[FLOOR_FROM_KIND[kind]], f"not measured: {FLOOR_FROM_KIND[kind]}'s (same layers)"
        if self.floors:
            smallest = min(self.floors, key=self.floors.get)
            return self.floors[smallest], f"not measured: the smallest measured ({smallest}; a lower bound)"
        return None, "no floor measured"

    def text(self) -> str:
        floors = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.floors.items())
        pack = (f"; {self.pack} cells share one GPU: each step {self.slowdown:.2f}x its alone time ({self.pack_source}), "
                f"GPU time divided by {self.pack}" if self.pack > 1 else "")
        return (f"{self.label}: peak {self.peak_tflops:g} TFLOP/s dense fp16/bf16 x utilisation "
                f"{self.utilisation * 100:.3g}% ({self.source}) = {self.sustained / 1e12:.1f} TFLOP/s sustained; "
                f"per-step floors {self.floor_source}" + (f": {floors}" if floors else "") + pack
                + f"; {self.memory_gib:g} GiB, of which {self.memory_gib - RESERVE_GIB:g} GiB for the model "
                f"({RESERVE_GIB:g} GiB reserve)")


def nearest_check(label: str, peak_fp16: float, checks: dict[str, GpuCheck]) -> tuple[GpuCheck | None, bool]:
    """(the check of this GPU class, False), else (the measured GPU nearest in peak, True), else (None, False)."""
    if label in checks:
        return checks[label], False
    if not checks:
        return None, False
    return min(checks.values(), key=lambda c: (abs(math.log(c.peak_fp16 / peak_fp16)), c.label)), True


def assumption_for(paper: str, gpu: str, utilisation: float | None, checks: dict, pack: int = 1) -> Assumption:
    """The assumption a table is priced at (the same for every paper: floors are per kind of cell)."""
    peak = peak_for(GPU_CLASSES[gpu])
    check, borrowed = nearest_check(peak["label"], peak["fp16"], checks)
    if utilisation is not None:
        util, source = utilisation, "--utilisation"
    elif check is not None:
        util = check.utilisation
        source = (f"the highest fp16 MFU measured on {check.label}: {check.utilisation_cell}, {check.file}"
                  + (f"; borrowed: {peak['label']} has no GPU check" if borrowed else ""))
    else:
        util, source = DEFAULT_UTILISATION, "assumed; no GPU check in docs/gpu/"
    a = Assumption(gpu, peak["label"], peak["fp16"], peak["memory_gib"], util, source, pack=pack)
    if check is not None:
        a.floors = dict(check.floors)
        a.floor_source = (f"measured on {check.label} ({check.file})" if not borrowed
                          else f"borrowed from {check.label} ({check.file}), the nearest measured GPU: {peak['label']} "
                               "has no GPU check")
    if pack > 1:
        p = check.packed if check is not None else None
        if p is None or pack > p["n"]:
            raise ValueError(f"--pack {pack}: packing is measured for up to {p['n'] if p else 1} cell(s) per GPU")
        a.slowdown = 1 + (p["slowdown"] - 1) * (pack - 1) / (p["n"] - 1)
        a.pack_source = (f"measured {p['slowdown']:.2f}x with {p['n']} {p['kind']} cells on {check.label}, {p['file']}"
                         + ("" if pack == p["n"] else f"; linear between 1 and {p['n']} cells")
                         + (f"; borrowed from {check.label}" if borrowed else ""))
    return a


def project(stage: Stage, m: dict, a: Assumption) -> dict:
    """GPU time (the larger of FLOP time and the per-step floor), memory, and the accumulation that fits."""
    per_example_step = m["step_flops"]                       # batch 1, scaled linearly
    step_flops = per_example_step * stage.batch
    eval_flops = m["fwd_flops"] * stage.eval_forwards
    total = step_flops * stage.steps + eval_flops if stage.steps is not None else None
    floor, floor_note = a.floor_for(stage.work.kind)
    step_floor = (floor or 0.0) * a.slowdown / a.pack      # GPU seconds per step: packed cells share the GPU
    flop_s = step_flops / a.sustained
    step_s = max(flop_s, step_floor)
    bound = "FLOPs" if flop_s >= step_floor else "floor"
    seconds = (None if stage.steps is None else
               stage.steps * step_s + max(eval_flops / a.sustained, stage.eval_batches * step_floor))
    mem = memory_bytes(m["params"], m["act_fp16_bytes"], stage.batch, stage.optimizer)
    fits = mem["total"] <= a.budget
    k, micro = (1, stage.batch) if fits else accumulation(m["params"], m["act_fp16_bytes"], stage.batch, a.budget,
                                                           stage.optimizer)
    return {"params": m["params"], "batch": stage.batch, "flops_per_step": step_flops, "steps": stage.steps,
            "eval_flops": eval_flops, "eval_batches": stage.eval_batches, "total_flops": total,
            "flop_s_per_step": flop_s, "floor_s_per_step": floor, "floor_note": floor_note, "step_s": step_s,
            "bound": bound, "gpu_hours": None if seconds is None else seconds / 3600,
            "wall_hours": None if seconds is None else seconds * a.pack / 3600,
            "memory": mem, "act_fp32_per_example": m["act_fp32_bytes"], "act_fp16_per_example": m["act_fp16_bytes"],
            "fits": fits, "accumulation": k, "micro_batch": micro}


# ---------------------------------------------------------------- one table

def settings(profile: str, gpu: str, utilisation: float | None, pack: int, extra: list[str] = ()) -> dict:
    """What a plan was made with: a committed plan is replaced only by a plan of the same settings."""
    return {"profile": profile, "gpu": gpu, "utilisation": utilisation, "pack": pack, "overrides": list(extra)}


def plan_table(table: str, profile: str, gpu: str, utilisation: float | None, measured: dict,
               extra: list[str] = (), log: Any = print, pack: int = 1) -> dict:
    """Every cell of the table's sweep, composed, its stages measured and projected."""
    paper = table.split("_", 1)[0]
    a = assumption_for(paper, gpu, utilisation, measured, pack)
    from langrepr.cell import cell_fingerprint

    cells, downloads, findings = [], set(), []
    jobs = sweep_cells(table, profile, extra)
    for more in extra_sweeps(table, profile):   # sweeps its make target runs beside the experiment's own
        jobs += [job for job in sweep_cells(table, profile, [*extra, *more]) if job not in jobs]
    for overrides in jobs:
        name = cell_name(overrides)
        entry: dict[str, Any] = {"cell": name, "overrides": overrides, "stages": [], "findings": []}
        try:
            cfg, entry["findings"] = compose_cell(overrides)
            entry["fingerprint"] = portable_fingerprint(cfg, cell_fingerprint)
            entry["stage"] = str(cfg.get("stage", "train"))
            entry["dataset"] = dataset_name(cfg)
            downloads |= data_needs(cfg)
            reason = grid_composition(cfg)
            if reason:
                entry.update(stage="does not compose", findings=[f"does not compose: {reason} (not run, not counted)"])
                cells.append(entry)
                continue
            work = stages(cfg)
        except Exception as err:  # noqa: BLE001  (a cell that does not compose or validate is a finding)
            entry.update(stage="error", findings=[f"does not compose or validate: {' '.join(str(err).split())[:300]}"])
            work = []
        if not work and entry["stage"] != "error":
            entry["cpu"] = cpu_nature(cfg)
        for s in work:
            try:
                started = time.perf_counter()
                m = measure(s.work)
                row = project(s, m, a)
                log(f"  {table} {name} {s.name}: {m['params'] / 1e6:.1f}M params, "
                    f"{row['flops_per_step'] / 1e12:.3g} TFLOP/step ({time.perf_counter() - started:.1f} s)")
            except Exception as err:  # noqa: BLE001  (a model that does not build or run at full size: a finding)
                entry["findings"].append(f"{s.name} does not build or run at full size: {' '.join(str(err).split())[:300]}")
                continue
            entry["stages"].append({"name": s.name, "kind": s.work.kind, "shape": s.work.shape, "steps_note": s.steps_note,
                                    "examples": s.examples, "optimizer": s.optimizer, "precision": s.precision,
                                    "eval_note": s.eval_note, "share_key": s.share_key or f"{entry['fingerprint']}/{s.name}",
                                    "batch_setting": s.batch_setting, "notes": s.notes, **row})
        findings += [f"{name}: {f}" for f in entry["findings"]]
        cells.append(entry)
    wired = sorted({s["name"].split()[0] for c in cells for s in c["stages"] if s["precision"].startswith("32 (the")})
    if wired:
        findings.append(f"the multi-hot {' and '.join(wired)} stages build their own pl.Trainer without `precision` "
                        "or `accumulate_grad_batches` (langrepr.tasks.multihot_mlm / multihot_downstream / span_qa): "
                        "on a GPU they run fp32 (about twice the activation memory projected here for fp16 AMP, and "
                        "no fp16 tensor-core rate), and a batch that does not fit cannot be accumulated")
    return {"table": table, "profile": profile, "settings": settings(profile, gpu, utilisation, pack, extra),
            "assumption": a.__dict__ | {"text": a.text()}, "cells": cells,
            "downloads": sorted(downloads), "findings": findings, "totals": totals(cells)}


def portable_fingerprint(cfg: Any, fingerprint: Any) -> str:
    """The cell's fingerprint with no local data folder (`paths.data_dir: null`, the committed default).

    The resolved config carries `$LANGREPR_DATA_DIR`, so the real fingerprint differs per machine; a committed plan
    must not change with the machine that wrote it.
    """
    import copy

    from omegaconf import open_dict

    if _sel(cfg, "paths.data_dir") is None:
        return fingerprint(cfg)
    c = copy.deepcopy(cfg)
    with open_dict(c):
        c.paths.data_dir = None
    return fingerprint(c)


def unique_stages(cells: list[dict], seen: set) -> Iterator[tuple[dict, dict]]:
    """(cell, stage) of each stage whose share_key is not in ``seen`` yet (a shared stage counts once); adds it."""
    for c in cells:
        for s in c["stages"]:
            if s["share_key"] in seen:
                continue
            seen.add(s["share_key"])
            yield c, s


def totals(cells: list[dict]) -> dict:
    """GPU-hours with shared stages (one multi-hot pretraining per config) counted once; unknowns counted apart."""
    seen, hours, unknown, peak = set(), 0.0, 0, 0
    not_fitting = []
    for c, s in unique_stages(cells, seen):
        if s["gpu_hours"] is None:
            unknown += 1
        else:
            hours += s["gpu_hours"]
        peak = max(peak, s["memory"]["total"])
        if not s["fits"]:
            not_fitting.append(f"{c['cell']} ({s['name']})")
    return {"gpu_hours": hours, "stages_unknown": unknown, "stages": len(seen), "peak_bytes": peak,
            "cells": len(cells), "cpu_cells": sum(1 for c in cells if c.get("cpu")),
            "error_cells": sum(1 for c in cells if c["stage"] == "error"), "not_fitting": not_fitting}


# ---------------------------------------------------------------- rendering

def _hours(h: float | None, digits: int = 2) -> str:
    """GPU-hours for a table cell: 'unknown', '<0.01' below the printed precision, else fixed decimals."""
    if h is None:
        return "unknown"
    floor = 10 ** -digits
    return f"<{floor:g}" if 0 < h < floor else f"{h:,.{digits}f}"


def _gb(n: float) -> str:
    return f"{n / GIB:.1f}"


def _num(n: float | None, unit: str = "") -> str:
    if n is None:
        return "unknown"
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}{unit}"
    return f"{n:.3g}{unit}"


def _bound(s: dict) -> str:
    """Which term priced the stage: FLOP time at the utilisation, or the measured per-step floor (ms per step)."""
    if s.get("bound") is None:
        return "unknown"
    ms = f"{s['step_s'] * 1e3:.3g} GPU-ms/step"
    if s["bound"] == "FLOPs":
        return f"FLOPs ({ms})"
    return f"floor ({ms}; {s['floor_note']})"


METHOD = __doc__.split("How each number is made (also printed in every plan):", 1)[1].strip()


def render_table(plan: dict) -> str:
    a, t = plan["assumption"], plan["totals"]
    gb = a["memory_gib"]
    more = f", plus {t['stages_unknown']} stage(s) of unknown length" if t["stages_unknown"] else ""
    lines = [f"# Cost plan: {plan['table']} (profile {plan['profile']})", "",
             f"Throughput: {a['text']}.", "",
             f"**Total: {_hours(t['gpu_hours'], 1)} GPU-hours** over {t['stages']} gradient stage(s) "
             f"(shared pretrainings once){more}; "
             f"{t['cpu_cells']} CPU cell(s); {t['error_cells']} cell(s) that do not compose. Peak memory "
             f"{_gb(t['peak_bytes'])} GiB.", "",
             f"| cell | stage | params | training data | FLOPs/step | steps | GPU-h | bound by | "
             f"peak GiB (fp16 AMP) | fits {gb:g} GB | fits with |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    if not t["stages"]:
        lines = lines[:-2] + ["No gradient cell: nothing in this table needs a GPU."]
    for c in plan["cells"]:
        for s in c["stages"]:
            fit = "yes" if s["fits"] else "no"
            hours = _hours(s["gpu_hours"])
            how = ("" if s["fits"] else "no micro-batch fits" if not s["accumulation"]
                   else f"{s['batch_setting']}={s['micro_batch']}, accumulate {s['accumulation']} (the pipeline has "
                        "no accumulation setting)" if s["precision"].startswith("32 (the")
                   else f"{s['batch_setting']}={s['micro_batch']} trainer.accumulate_grad_batches={s['accumulation']}")
            lines.append(f"| {c['cell']} | {s['name']} | {s['params'] / 1e6:.1f}M | {s['examples']} | "
                         f"{_num(s['flops_per_step'])} (batch {s['batch']}) | {s['steps_note']} | "
                         f"{hours} | {_bound(s)} | "
                         f"{_gb(s['memory']['total'])} | {fit} | {how} |")
    if t["not_fitting"]:
        lines += ["", f"Does not fit {gb:g} GB at the paper's batch: " + "; ".join(t["not_fitting"]) + "."]
    cpu = [c for c in plan["cells"] if c.get("cpu")]
    if cpu:
        lines += ["", "## CPU cells (no GPU time)", "", "| cell | what it does |", "|---|---|"]
        lines += [f"| {c['cell']} | {c['cpu']} |" for c in cpu]
    lines += ["", "## Stage details", ""]
    for c in plan["cells"]:
        for s in c["stages"]:
            m = s["memory"]
            lines.append(f"- {c['cell']} / {s['name']}: {s['kind']} {json.dumps(s['shape'], default=str)}; "
                         f"{s['optimizer']}, precision {s['precision']}; evaluation {s['eval_note'] or 'not counted'} "
                         f"({_num(s['eval_flops'], 'FLOP')}); memory weights {_gb(m['weights_fp32'])} + fp16 copy "
                         f"{_gb(m['weights_fp16_copy'])} + grads {_gb(m['gradients'])} + optimiser {_gb(m['optimizer'])} "
                         f"+ activations {_gb(m['activations'])} GiB ({_num(s['act_fp16_per_example'], 'B')} per example "
                         f"in fp16, {_num(s['act_fp32_per_example'], 'B')} in fp32)"
                         + "".join(f"; {n}" for n in s["notes"]))
    if plan["downloads"]:
        lines += ["", "## Data to download", "", "| data | size | licence | gated |", "|---|---|---|---|"]
        for key in plan["downloads"]:
            d = DOWNLOADS[key]
            lines.append(f"| {d['what']} | {d['size']} | {d['licence']} | {d['gated']} |")
    sizes = sorted({DATASET_DOWNLOAD.get(c.get("dataset"), c.get("dataset")) for c in plan["cells"] if c["stages"]}
                   & set(SIZES))
    if sizes:
        lines += ["", "## Training-set sizes used", ""]
        lines += [f"- {k}: {SIZES[k]['train']:,} {SIZES[k]['unit']} ({SIZES[k]['source']})"
                  if SIZES[k].get("train") else f"- {k}: unknown ({SIZES[k]['source']})" for k in sizes]
    if plan["findings"]:
        lines += ["", "## Findings", ""] + [f"- {f}" for f in plan["findings"]]
    lines += ["", "## Method", "", METHOD, ""]
    return "\n".join(lines)


def render_all(plans: list[dict]) -> str:
    seen, total, unknown = set(), 0.0, 0
    by_paper: dict[str, float] = {}
    lines = ["# Cost plan: every table", "", "| table | GPU-hours | gradient stages | CPU cells | peak GiB | "
             "does not fit at the paper's batch | does not compose |", "|---|---|---|---|---|---|---|"]
    for plan in plans:
        t = plan["totals"]
        lines.append(f"| [{plan['table']}]({plan['table']}.md) | {_hours(t['gpu_hours'], 1)}"
                     + (f" (+{t['stages_unknown']} unknown)" if t["stages_unknown"] else "")
                     + f" | {t['stages']} | {t['cpu_cells']} | {_gb(t['peak_bytes'])} | {len(t['not_fitting'])} | "
                     f"{t['error_cells']} |")
        paper = plan["table"].split("_", 1)[0]
        for _, s in unique_stages(plan["cells"], seen):
            if s["gpu_hours"] is None:
                unknown += 1
            else:
                total += s["gpu_hours"]
                by_paper[paper] = by_paper.get(paper, 0.0) + s["gpu_hours"]
    lines += ["", "Per paper (each stage once, whichever tables share it): "
              + "; ".join(f"{p} {_hours(h, 1)} GPU-hours" for p, h in sorted(by_paper.items())), "",
              f"**All papers: {total - by_paper.get('grid', 0.0):,.1f} GPU-hours**"
              + (f" (with the cross-paper grid: {total:,.1f})" if "grid" in by_paper else "")
              + (f", plus {unknown} stage(s) of unknown length" if unknown else "")
              + ". A table's total counts the cells of its own sweep; where its `make` target also runs another "
                "sweep (EWE 4-5 read Table 3; multi-hot 2-5 fine-tune multihot_pretrain's cells and 4-5 read Table 3; "
                "Bit Cipher reads Tables 1/3/5) those cells are counted in that sweep's row.", ""]
    if plans:
        lines += [f"Projected for **{plans[0]['assumption']['label']}** (`--gpu {plans[0]['assumption']['gpu']}`"
                  + (f", `--pack {plans[0]['assumption']['pack']}`" if plans[0]['assumption']['pack'] > 1 else "")
                  + f"). Throughput: {plans[0]['assumption']['text']}.", ""]
    findings = [f"{p['table']}: {f}" for p in plans for f in p["findings"]]
    if findings:
        lines += ["## Findings", ""] + [f"- {f}" for f in findings] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- CLI

def tables() -> list[str]:
    from langrepr.confpaths import group_options

    return group_options("experiment")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (what is wrong, where to look), exit status 2."""

    def error(self, message: str) -> None:
        raise SystemExit(f"error: {message} (python -m langrepr.plan --help)")


def check_arguments(args: argparse.Namespace, chosen: list[str], checks: dict) -> None:
    """Every value range-checked before any cell is measured: one line (what is wrong, how to fix), exit 2."""
    from langrepr.confpaths import group_options

    profiles = group_options("profile")
    if args.profile not in profiles:
        raise SystemExit(f"error: unknown profile '{args.profile}': choose from {', '.join(profiles)} (PROFILE=...)")
    if args.utilisation is not None and not 0 < args.utilisation <= 1:
        raise SystemExit(f"error: --utilisation {args.utilisation:g} is not a share of the peak: give a number in "
                         "(0, 1], e.g. 0.35, or leave it out to use the measured one")
    if args.pack < 1:
        raise SystemExit(f"error: --pack {args.pack} is not a number of cells: give 1 or more (PACK=...)")
    try:
        assumption_for("", args.gpu, args.utilisation, checks, args.pack)
    except ValueError as err:
        raise SystemExit(f"error: {err}: choose a smaller --pack (PACK=...)") from None
    if args.overrides:
        for table in chosen:
            try:
                sweep_cells(table, args.profile, args.overrides)
            except Exception as err:  # noqa: BLE001  (Hydra's message, in one line)
                first = " ".join(str(err).split("\n")[0].split())[:300]
                raise SystemExit(f"error: the overrides {' '.join(args.overrides)} do not compose for {table}: "
                                 f"{first}") from None


def committed_settings(path: Path) -> dict | None:
    """The settings of the plan already at ``path`` (a plan written before settings were recorded: its profile/GPU)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return old.get("settings") or settings(old.get("profile"), (old.get("assumption") or {}).get("gpu"), None, 1)


def main(argv: list[str] | None = None) -> None:
    from langrepr.utils import write_text_atomic

    parser = _Parser(description="Cost plan of a profile: GPU-hours, memory and data per table cell.")
    parser.add_argument("--profile", default="full")
    parser.add_argument("--table", action="append", help="one table (repeatable); default every table")
    parser.add_argument("--gpu", default="rtx4090", choices=sorted(GPU_CLASSES))
    parser.add_argument("--utilisation", type=float, default=None,
                        help="sustained share of peak for the FLOP term (default: the highest MFU a GPU check "
                             f"measured on that GPU or the nearest measured one, else {DEFAULT_UTILISATION})")
    parser.add_argument("--pack", type=int, default=1,
                        help="cells sharing one GPU, priced from the measured packed rate (docs/gpu/packed_*.json)")
    parser.add_argument("--out", default=str(OUT_DIR))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every cell, e.g. trainer.max_steps=100")
    args = parser.parse_args(argv)
    known = tables()
    chosen = args.table or known
    unknown = [t for t in chosen if t not in known]
    if unknown:
        raise SystemExit(f"error: unknown table {', '.join(unknown)}: choose from {', '.join(known)}")
    checks = load_checks()
    check_arguments(args, chosen, checks)
    out = Path(args.out)
    mine = settings(args.profile, args.gpu, args.utilisation, args.pack, args.overrides)
    plans, partial = [], False
    for table in chosen:
        print(f"planning {table} ...", flush=True)
        plan = plan_table(table, args.profile, args.gpu, args.utilisation, checks, args.overrides, pack=args.pack)
        old = committed_settings(out / f"{table}.json") if (out / f"{table}.json").exists() else None
        name = table
        if args.overrides or (old is not None and old != mine):   # never overwrite the committed plan with another
            name, partial = f"{table}.partial", True
            kept = (f"kept {out / table}.json (profile {old['profile']}, gpu {old['gpu']}, pack {old.get('pack', 1)})"
                    if old else f"{out / table}.json left alone")
            print(f"{kept}: this plan has other settings or overrides, written beside it -> {out / name}.md",
                  flush=True)
        write_text_atomic(out / f"{name}.json", json.dumps(plan, indent=1, default=str) + "\n")
        write_text_atomic(out / f"{name}.md", render_table(plan) + "\n")
        print(f"{table}: {_hours(plan['totals']['gpu_hours'], 1)} GPU-hours -> {out / name}.md", flush=True)
        plans.append(plan)
    if not args.table:
        name = "all.partial.md" if partial else "all.md"
        write_text_atomic(out / name, render_all(plans) + "\n")
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
