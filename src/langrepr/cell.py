"""A cell's identity and lifecycle on disk: fingerprint, data digest, lock, status, force, resume.

One cell = one folder = one result. Its identity is what its stage reads, nothing else:

- a train cell: the *resolved* config (so `${oc.env:...}` data locations count) minus where it is written;
- a pipeline / stats cell: its `pipeline:` / `stats:` node (resolved, so whatever it interpolates counts), its
  seed and its stage; a count cell: `model.net`, `count_net_kwargs`, seed and stage. Editing one paper's model
  or the trainer therefore never invalidates another paper's pipeline cells;
- plus the content of the data it read: a digest of the files its config lists (`langrepr.data.integrity`) and
  the sha256 of every file it opened under its data roots (`data_files` in metrics.json).

`metrics.json` carries a status — running, finished, failed (with the error line) or diverged — and a finished
cell is reused only when its fingerprint matches and its data is unchanged. A record written under an earlier
fingerprint scheme (the whole resolved config, or the unresolved one before that) is still recognised and is
rewritten with the current fingerprint on its first match (`migrate`), so no finished cell has to be re-run.
Starting a cell over moves the previous attempt aside (`<run>/.replaced/<cell>@<time>/`, its metrics.json
renamed so tables never read it) instead of mixing old and new files; a checkpoint is resumed only into the
config that wrote it; one cell runs in one process at a time (`lock`).

The identity is computed here; the folder's lifecycle lives in `langrepr.cell_lifecycle` (re-exported here).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

import langrepr
from langrepr.cell_lifecycle import (  # noqa: F401
    KEEP_ON_RESTART,
    LOCK_FILE,
    _cannot_move,
    _rename,
    adopt_legacy_folder,
    keep_csv_log,
    lock,
    migrate,
    move_aside,
    read_record,
    restore_csv_log,
    resume_point,
    reusable,
)
from langrepr.confpaths import CONF_DIR, FACTS_NODE
from langrepr.data.integrity import source_contents, source_digest
from langrepr.errors import UserError

# keys that say where/how a cell is written or shown, not what it computes
# the training-step switches (conf/train.yaml, train.step_switches): how fast a step runs, not what it computes
STEP_SWITCHES = ("compile", "pad_to_fixed", "sync_free", "fused_optimizer", "matmul_precision")
NOT_IDENTITY = ("ckpt_path", "force", "logger", "table", "hydra", "supported_datasets", "seeds", *STEP_SWITCHES)
# FACTS_NODE (langrepr.confpaths): a node of facts about a dataset or pipeline (sizes and their sources, downloads),
# wherever it sits (`dataset.about`): read by the cost plan, never by a cell, and dropped before hashing
# what each non-train stage reads from the config (besides its seed); a train cell reads all of it
STAGE_NODES = {"pipeline": ("pipeline",), "stats": ("stats",), "count": ("model.net", "count_net_kwargs")}


def _hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resolved(node: Any) -> Any:
    try:
        return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    except Exception as err:  # noqa: BLE001  (an interpolation that cannot resolve: say which)
        raise UserError(f"the config does not resolve: {' '.join(str(err).split()[:40])}") from None


def _drop_facts(node: Any) -> None:
    """Remove every `about:` node under a config or a plain container, in place (interpolations left unresolved)."""
    if isinstance(node, DictConfig):
        with open_dict(node):
            node.pop(FACTS_NODE, None)
        children = [node._get_node(key) for key in node]
    elif isinstance(node, dict):
        node.pop(FACTS_NODE, None)
        children = list(node.values())
    else:
        return
    for child in children:
        if isinstance(child, (DictConfig, dict)) and not (isinstance(child, DictConfig) and child._is_interpolation()):
            _drop_facts(child)


def _without_locations(cfg: DictConfig) -> DictConfig:
    """A copy of the config minus where and how the cell is written or shown (not what it computes), and its facts."""
    c = copy.deepcopy(cfg)
    with open_dict(c):
        for key in NOT_IDENTITY:
            c.pop(key, None)
        if "paths" in c:
            c.paths.output_dir, c.paths.output_root = "<cell>", "<root>"
            if "cache_dir" in c.paths:
                c.paths.cache_dir = "<cache>"
        if c.get("callbacks"):
            c.callbacks.pop("progress", None)
        if c.get("trainer"):
            c.trainer.pop("enable_progress_bar", None)
    _drop_facts(c)
    return c


def config_fingerprint(cfg: DictConfig) -> str:
    """Hash of the whole resolved config minus output locations: a train cell's identity.

    For the other stages it is the previous scheme's fingerprint (accepted as legacy). Validation also calls it
    to check that every interpolation resolves.
    """
    return _hash(_resolved(_without_locations(cfg)))


def stage_reads(cfg: DictConfig) -> dict[str, Any]:
    """What the cell's stage reads from the config, resolved (locations as placeholders): its identity."""
    stage = cfg.get("stage", "train")
    c = _without_locations(cfg)
    if stage not in STAGE_NODES:
        return _resolved(c)
    reads = {"stage": stage, "seed": c.get("seed")}
    for key in STAGE_NODES[stage]:
        reads[key] = _resolved(OmegaConf.select(c, key, default=None))
    return reads


def cell_fingerprint(cfg: DictConfig) -> str:
    """The cell's identity: the hash of what its stage reads (`stage_reads`).

    For a train cell that is `config_fingerprint` itself, so train cells and their checkpoints keep theirs.
    """
    if cfg.get("stage", "train") not in STAGE_NODES:
        return config_fingerprint(cfg)
    return _hash(stage_reads(cfg))


# Entry points that moved (old `_target_` -> new): a cell recorded under the old name is still this cell, so its
# finished record is recognised (and migrated) instead of refused. Add a line when a `_target_` moves.
MOVED_TARGETS = {
    # multi-hot LM non-gradient cells, data/ and tasks/ -> pipelines/multihot/ (issue 20 item 3)
    "langrepr.data.korean.prepare.table1_pipeline": "langrepr.pipelines.multihot.token_lists.table1_pipeline",
    "langrepr.tasks.span_qa.korquad_answer_pipeline": "langrepr.pipelines.multihot.answers.korquad_answer_pipeline",
}


def with_old_targets(cfg: DictConfig) -> list[DictConfig]:
    """The config as it was written before its `_target_`s moved (`MOVED_TARGETS`); [] when none moved."""
    old_names: dict[str, list[str]] = {}
    for old, new in MOVED_TARGETS.items():
        old_names.setdefault(new, []).append(old)
    moved: list[tuple[str, list[str]]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, DictConfig):
            target = node._get_node("_target_") if "_target_" in node else None
            if target is not None and not target._is_interpolation() and target._value() in old_names:
                moved.append((f"{path}_target_", old_names[target._value()]))
            for key in node:
                if key != "hydra":
                    walk(node._get_node(key), f"{path}{key}.")

    walk(cfg, "")
    variants = []
    for key, names in moved:
        for name in names:
            c = copy.deepcopy(cfg)
            OmegaConf.update(c, key, name, force_add=True)
            variants.append(c)
    return variants


def legacy_fingerprints(cfg: DictConfig) -> set[str]:
    """Fingerprints earlier schemes gave this cell: a finished record carrying one is still this cell's.

    The earlier schemes of this config, and every scheme (the current one too) of the config with its moved
    `_target_`s under their old names. A scheme that cannot hash a config (a pipeline cell whose unused nodes
    no longer resolve) gives none.
    """
    found = set()
    for variant, schemes in [(cfg, (config_fingerprint, legacy_fingerprint))] + [
            (old, (cell_fingerprint, config_fingerprint, legacy_fingerprint)) for old in with_old_targets(cfg)]:
        for scheme in schemes:
            try:
                found.add(scheme(variant))
            except Exception:  # noqa: BLE001  (then no record can carry that scheme's fingerprint either)
                continue
    return found - {cell_fingerprint(cfg)}


def legacy_fingerprint(cfg: DictConfig) -> str:
    """The pre-digest fingerprint (unresolved config), accepted for cells finished before it changed."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    _drop_facts(plain)
    for key in ("paths", "ckpt_path", "force", "logger", "table", "supported_datasets", *STEP_SWITCHES):
        plain.pop(key, None)
    callbacks = plain.get("callbacks") or {}
    for key in ("last_checkpoint", "non_finite"):       # added with this scheme; absent from older records
        callbacks.pop(key, None)
    if isinstance(callbacks.get("progress"), dict) and callbacks["progress"].get("_target_") == "langrepr.callbacks.ProgressBar":
        callbacks["progress"] = {"_target_": "pytorch_lightning.callbacks.RichProgressBar"}   # how it was written then
    if isinstance(callbacks.get("checkpoint"), dict) and callbacks["checkpoint"].get("save_last") is False:
        callbacks["checkpoint"]["save_last"] = True
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def data_nodes(cfg: DictConfig) -> list[dict[str, Any]]:
    """The resolved config nodes that read data for this stage."""
    stage = cfg.get("stage", "train")
    node = {"train": "dataset.datamodule", "stats": "stats", "pipeline": "pipeline"}.get(stage)
    value = OmegaConf.select(cfg, node) if node else None
    if value is None:
        return []
    return [OmegaConf.to_container(value, resolve=True)]


def data_digest(cfg: DictConfig) -> str | None:
    """Digest of the files the config lists (EWE / TensorCoder datamodules); None when it lists none."""
    return source_digest(data_nodes(cfg))


def data_contents(cfg: DictConfig) -> list[str]:
    """sha256 of the files the config lists, sorted (the same data at another path has the same ones)."""
    return source_contents(data_nodes(cfg))


def data_roots(cfg: DictConfig, output_dir: Path) -> tuple[list[Path], list[Path]]:
    """(roots, excluded): where this cell's data lives, for recording which files it reads.

    The roots are `paths.data_dir` and every existing path the config names (a string with a '/'), except
    folders that hold code; excluded are the cell's outputs, the derived caches and the code.
    """
    c = copy.deepcopy(cfg)
    with open_dict(c):
        if "paths" in c:
            c.paths.output_dir = str(output_dir)
    code = [Path(langrepr.__file__).resolve().parent, CONF_DIR, Path(sys.prefix), Path(sys.base_prefix)]
    excluded = [Path(output_dir), *code]
    for key in ("paths.output_root", "paths.cache_dir"):
        value = OmegaConf.select(c, key, default=None, throw_on_resolution_failure=False)
        if value:
            excluded.append(Path(str(value)))
    try:
        plain = OmegaConf.to_container(c, resolve=True)
    except Exception:  # noqa: BLE001  (unresolvable parts: then only the data folder is a root)
        plain = {"paths": {"data_dir": OmegaConf.select(c, "paths.data_dir", default=None,
                                                        throw_on_resolution_failure=False)}}
    roots = []
    for value in _strings(plain):
        if ("/" in value or value == (plain.get("paths") or {}).get("data_dir")) and os.path.exists(value):
            root = Path(value).resolve()
            if not any(root == c_ or root in c_.resolve().parents for c_ in code):   # "." or "/" hold code
                roots.append(root)
    return sorted(set(roots)), excluded


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
