"""Builders shared by the benchmark and GPU-check scripts: real model configs, random batches of the right shape."""

from __future__ import annotations

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import langrepr.train  # noqa: F401  (registers the config resolvers)
from langrepr.utils import PROJECT_ROOT


def build_net(model: str, overrides: list[str], num_labels: int = 1328) -> tuple[torch.nn.Module, dict]:
    """The net of conf/model/<model>.yaml (with overrides) and its input shape {u, v, vocab}."""
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"model={model}", *overrides])
    kwargs = {"num_labels": num_labels}
    net = instantiate(cfg.model.net, **kwargs)
    tok = cfg.model.tokenizer
    return net, {"u": tok.get("u", tok.get("max_length")), "v": tok.get("v", 1),
                 "vocab": tok.get("vocab_size", 0x10FFFF if "Codepoint" in tok._target_ else 256),
                 "bytes": "Byte" in tok._target_, "heads": cfg.model.net.num_heads}


def random_batch(shape: dict, batch: int, num_labels: int, generator: torch.Generator) -> dict:
    """Inputs like a tokenizer's: word-like byte materials for EWE, ids in range for ORIG; sparse labels."""
    u = shape["u"]
    if shape["bytes"]:
        ids = torch.randint(97, 123, (batch, u, shape["v"]), generator=generator)
        lengths = torch.randint(3, 11, (batch, u, 1), generator=generator)
        ids = ids.masked_fill(torch.arange(shape["v"]) >= lengths, 0)
    else:
        ids = torch.randint(5, min(shape["vocab"], 30000), (batch, u), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones(batch, u, dtype=torch.long),
            "labels": (torch.rand(batch, num_labels, generator=generator) < 0.003).float()}
