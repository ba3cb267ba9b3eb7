"""GPU classes (peak TFLOP/s, memory), downloads, and the reader of each dataset's facts (its YAML's `about:` node)."""

from __future__ import annotations

import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import yaml

from langrepr.confpaths import CONF_DIR, FACTS_NODE, option_files, option_path

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


@cache
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

def downloads() -> dict[str, dict]:
    """What a table may download: {what, size, licence, gated} per data set.

    Read from the `about.downloads` nodes of the config files that read the data (a dataset's file; the Bit Cipher
    probe pipeline for C4 and GUM), wherever in the file the node sits. size / licence say "unknown" where no source
    in the repository or a card gives it.
    """
    return dict(_downloads())


@lru_cache(maxsize=1)
def _downloads() -> tuple:
    found: dict[str, dict] = {}
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        for key, facts in _download_nodes(yaml.safe_load(path.read_text())):
            if key in found:
                raise ValueError(f"{path.relative_to(CONF_DIR)}: the download {key!r} is described in two files")
            found[key] = facts
    return tuple(found.items())


def _download_nodes(node: Any) -> list[tuple[str, dict]]:
    if not isinstance(node, dict):
        return []
    about = node.get(FACTS_NODE)
    out = list((about.get("downloads") or {}).items()) if isinstance(about, dict) else []
    for key, child in node.items():
        if key != FACTS_NODE:
            out += _download_nodes(child)
    return out


DATASET_DOWNLOAD = {"nsmc_text": "nsmc", "nsmc_style": "nsmc"}   # dataset config name -> downloads() key
