"""The pretraining cell a multi-hot fine-tuning cell starts from, found by its config.

A fine-tuning cell names the run that holds the pretraining cells (`pretrained.root`, e.g.
`outputs/quick/multihot_pretrain`) and what its pretraining must have been (`pretrained.expect`: the corpus, the
token-list sizes and kind, the model, the MLM settings and the seed, all resolved). The finished cell there whose
`config_resolved.yaml` holds exactly those values is the one: its `checkpoints/last.ckpt` holds the encoder
(the weights its own test pass scored), its `metrics.json` the held-out MLM scores. Nothing matching is one line
that names the make target whose first sweep runs it. The checkpoint counts as a file the fine-tuning cell read
(`integrity.note_read`), so re-running the pretraining (force=true) makes its finished fine-tuning cells refuse
reuse until they are re-run too.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from langrepr.data import integrity
from langrepr.errors import UserError

log = logging.getLogger(__name__)

# what a pretraining cell must share with the fine-tuning cell: `expect` key -> key of its resolved config
IDENTITY = {"corpus": "dataset.corpus", "token_lists": "dataset.token_lists", "token_list": "pipeline.token_list",
            "net": "model.net", "mlm": "mlm", "seed": "seed"}


@dataclass
class PretrainedCell:
    """A finished pretraining cell: its folder, its last checkpoint and its record."""

    folder: Path
    checkpoint: Path
    record: dict[str, Any]          # its metrics.json (metrics, steps, wall_time_s, fingerprint)


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def _canonical(value: Any) -> str:
    return json.dumps(plain(value), sort_keys=True, default=str)


def differences(config: dict, expect: dict) -> list[str]:
    """The identity keys (dotted config keys) on which a pretraining cell's config differs from `expect`."""
    recorded = OmegaConf.create(config)
    return [path for key, path in IDENTITY.items()
            if _canonical(OmegaConf.select(recorded, path, default=None)) != _canonical(expect.get(key))]


def describe(expect: dict) -> str:
    net, mlm = expect.get("net") or {}, expect.get("mlm") or {}
    return (f"token list {expect.get('token_list')}, model {net.get('num_layers')} layers x {net.get('hidden_size')}, "
            f"mlm.loss {mlm.get('loss')}, {mlm.get('steps')} steps, seed {expect.get('seed')}")


def _finished(folder: Path) -> tuple[dict, dict] | None:
    """(record, resolved config) of a finished cell folder, None otherwise (absent, running, unreadable)."""
    try:
        record = json.loads((folder / "metrics.json").read_text())
        if not isinstance(record, dict) or record.get("status") != "finished":
            return None
        config = yaml.safe_load((folder / "config_resolved.yaml").read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return record, config


def find_pretrained(root: str | Path, expect: dict, make: str, profile: str, cell: str | None = None
                    ) -> PretrainedCell:
    """The finished pretraining cell under `root` trained with `expect`; UserError (one line) when there is none."""
    root, expect = Path(root), plain(expect)
    run = f"run `make {make} PROFILE={profile}` first (its first sweep runs the pretraining cells)"
    if cell:
        found = _finished(root / cell)
        if found is None:
            raise UserError(f"pretrained.cell={cell}: {root / cell} is not a finished pretraining cell: {run}")
        diff = differences(found[1], expect)
        if diff:
            raise UserError(f"pretrained.cell={cell} was pretrained with another {', '.join(diff)} than this cell "
                            f"asks for ({describe(expect)}): drop pretrained.cell, or {run}")
        matching = [(root / cell, found[0])]
    else:
        matching = []
        for path in sorted(root.glob("*/metrics.json")) if root.is_dir() else []:
            found = _finished(path.parent)
            if found is not None and not differences(found[1], expect):
                matching.append((path.parent, found[0]))
    if not matching:
        raise UserError(f"no finished pretraining cell under {root} matches this fine-tuning cell "
                        f"({describe(expect)}): {run}")
    matching.sort(key=lambda m: (m[0] / "metrics.json").stat().st_mtime)
    folder, record = matching[-1]
    if len(matching) > 1:
        log.warning("%d pretraining cells match; using the newest, %s (choose with pretrained.cell=<folder>)",
                    len(matching), folder.name)
    checkpoint = folder / "checkpoints" / "last.ckpt"
    if not checkpoint.is_file():
        raise UserError(f"pretraining cell {folder} finished without checkpoints/{checkpoint.name}: rerun it with "
                        "force=true")
    integrity.note_read([checkpoint])
    log.info("Fine-tuning from pretraining cell %s", folder)
    return PretrainedCell(folder, checkpoint, record)
