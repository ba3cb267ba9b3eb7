"""The one module that knows where `conf/` is, which options a config group has, and our OmegaConf resolvers.

Hydra reads options from several config roots: `conf/` itself and one folder per paper, `conf/papers/<paper>/`,
which `conf/train.yaml` puts on Hydra's search path (`hydra.searchpath`). So `conf/papers/leam/model/leam.yaml`
answers `model=leam` exactly as `conf/model/leam.yaml` would. Whatever lists a group's options asks
`group_options`, which reads every root.

Kept free of torch and Lightning so that rendering a table (`python -m langrepr.tables`) and building the
report start without importing training code.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
PAPERS = "papers"   # conf/papers/<paper>/<group>/<option>.yaml: one paper's options, on Hydra's search path
# bytes of one cell folder name: a file system allows 255, and force=true moves a cell to `<name>@<time>` (+16)
FACTS_NODE = "about"   # a node of facts (sizes, sources, downloads) wherever it sits: read by the plan, no part of identity
MAX_CELL_NAME = 200
SHORTENED = "~"   # the mark of a shortened cell name: `<whole overrides that fit>,~<sha256 of the full name>`
SLASH = "%2F"   # a '/' of an override, in a cell folder name (a file name cannot hold '/')


def cell_dir_name(name: str | None) -> str:
    """The cell folder for Hydra's override list (`${cell:${hydra.job.override_dirname}}`): always ONE folder.

    The joined overrides while they fit in MAX_CELL_NAME bytes; a longer list (a dozen overrides, issue 21 X59)
    keeps the whole overrides that fit and ends in a hash of the full list, so one command still names one folder
    and two lists never share one (metrics.json records the full list). Every '/' is written %2F, as the shortened
    names always did: `dataset.corpus.path=/data/ptb` was `dataset.corpus.path=` / `data` / `ptb`, three folders
    deep with the cell's `.replaced/` inside the nest (issue 33 X59). Keys hold no '/' (Hydra keeps `hydra/...`
    overrides out of override_dirname; no other config group is nested), so a name without a '/' is what it
    always was and no recorded cell changes folder; a cell nested before (`legacy_cell_dir_name`) is found by
    `cell.adopt_legacy_folder`.
    """
    name = name or "defaults"   # a cell with no overrides still needs a directory name
    flat = name.replace("/", SLASH)
    if len(flat.encode()) <= MAX_CELL_NAME:
        return flat
    return _shortened(name, flat)


def legacy_cell_dir_name(name: str | None) -> str:
    """The folder (relative, maybe nested) a cell got before issue 33; only ever read, to find a cell recorded then.

    Every '/' was a folder level while each level fitted MAX_CELL_NAME bytes.
    """
    name = name or "defaults"
    if all(len(part.encode()) <= MAX_CELL_NAME for part in name.split("/")):
        return name
    return _shortened(name, name.replace("/", SLASH))


def _shortened(name: str, flat: str) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    room = MAX_CELL_NAME - len(digest) - 2
    head = ""
    for override in flat.split(","):
        if len(f"{head},{override}".encode()) > room:
            break
        head = f"{head},{override}" if head else override
    return f"{head},{SHORTENED}{digest}" if head else f"{SHORTENED}{digest}"


OmegaConf.register_new_resolver("cell", cell_dir_name, replace=True)
# `hydra.searchpath: [file://${conf_dir:}/papers/ewe, ...]` in train.yaml: absolute, whatever the working directory
OmegaConf.register_new_resolver("conf_dir", lambda: CONF_DIR.as_posix(), replace=True)


def seeds_error(n: object) -> str | None:
    """The line for a `seeds=` that is not a count of seeds (None when it is one, or null: the table's own count).

    `seeds=0` swept `seed=''`, `seeds=2.5` ran 2 and `seeds=abc` was a raw interpolation error: each is refused.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        return f"seeds={n}: pass a whole number >= 1 (each cell runs seeds 1..seeds)"
    return None


def seed_list(n: object, default: int = 3) -> str:
    """`1,2,...,n` for every sweep's `seed: ${seed_list:${seeds}}`, quick and full alike.

    The quick sweeps hard-coded 1,2,3 and ignored `seeds=` (issue 33 finding 6). `seeds: null` (train.yaml) is the
    table's own count: `default`, 3 unless the sweep says `${seed_list:${seeds},1}`.
    """
    error = seeds_error(n)
    if error:
        raise ValueError(error)
    return ",".join(str(i) for i in range(1, (default if n is None else n) + 1))


# `hydra.sweeper.params.seed: ${seed_list:${seeds}}`: every sweep runs seeds 1..seeds (its own count unless `seeds=N`)
OmegaConf.register_new_resolver("seed_list", seed_list, replace=True)


@lru_cache(maxsize=1)
def config_roots() -> tuple[Path, ...]:
    """Every folder Hydra reads options from, in its search order: `conf/`, then train.yaml's `hydra.searchpath`."""
    searchpath = OmegaConf.load(CONF_DIR / "train.yaml").hydra.get("searchpath") or []
    roots = [CONF_DIR]
    for entry in searchpath:
        if not entry.startswith("file://"):
            raise ValueError(f"conf/train.yaml: hydra.searchpath entry {entry!r} is not a file:// folder")
        roots.append(Path(entry.removeprefix("file://")))
    return tuple(roots)


def config_groups() -> list[str]:
    """The config groups (`dataset`, `model`, `trainer`, ...): folders of any config root, sorted."""
    return sorted({p.name for root in config_roots() if root.is_dir() for p in root.iterdir()
                   if p.is_dir() and p.name != PAPERS})


def option_files(group: str) -> dict[str, Path]:
    """{option: file} of a config group over every config root; the first root wins, as in Hydra."""
    files: dict[str, Path] = {}
    for root in config_roots():
        for path in sorted((root / group).glob("*.yaml")):
            files.setdefault(path.stem, path)
    return files


def group_options(group: str) -> list[str]:
    """The option names of a config group (`model`, `dataset`, `experiment`, ...) over every config root, sorted."""
    return sorted(option_files(group))


def option_path(group: str, option: str) -> str:
    """Where `group=option` is written, relative to the repository (`conf/papers/leam/dataset/ag_news.yaml`).

    For messages: an option lives in conf/ or in one paper's folder, so a message naming `conf/<group>/` would send
    a reader to a file that is not there. An option no root has is named where a new one would go: `conf/<group>/`.
    """
    path = option_files(group).get(option, CONF_DIR / group / f"{option}.yaml")
    return path.relative_to(CONF_DIR.parent).as_posix()
