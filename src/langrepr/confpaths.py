"""The one module that knows where `conf/` is, which options a config group has, and our OmegaConf resolvers.

Kept free of torch and Lightning so that rendering a table (`python -m langrepr.tables`) and building the
report start without importing training code.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

# a cell with no overrides still needs a directory name
OmegaConf.register_new_resolver("cell", lambda name: name or "defaults", replace=True)
# `hydra.sweeper.params.seed: ${seed_list:${seeds}}`: the full sweeps run seeds 1..seeds (3 unless `seeds=N`)
OmegaConf.register_new_resolver("seed_list", lambda n: ",".join(str(i) for i in range(1, int(n) + 1)), replace=True)


def group_options(group: str) -> list[str]:
    """The option names of a config group (`model`, `dataset`, `experiment`, ...), sorted."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
