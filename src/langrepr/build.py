"""Compose a cell's config and build its stages: the one place training, the plan, benchmarks and the GPU check do it.

`compose` reads `conf/train.yaml` with a command's overrides, as `python -m langrepr.train` sees them;
`build_cell` instantiates a train cell's datamodule (tokenizer, prepare, setup), network and task, in the order
`langrepr.train.run_training` runs them (the order fixes the random draws, hence the results). The plan builds a
network without data (`build_net` with the runtime kwargs it knows from the config). Nothing here imports torch or
the training loop at import time, so the plan's tests and `langrepr.tables` may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compose(overrides: list[str], hydra: bool = False) -> Any:
    """The composed config of one command's overrides (`experiment=… profile=… model=…`); Hydra's own node if asked."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from langrepr.confpaths import CONF_DIR  # registers the config resolvers (cell, conf_dir, seed_list)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose("train", overrides=overrides, return_hydra_config=hydra)


def task_kwargs(dm: Any) -> dict:
    """Runtime values the task needs: a datamodule's `task_kwargs`, else the label count it gives the net."""
    if hasattr(dm, "task_kwargs"):
        return dict(dm.task_kwargs)
    return {"num_labels": dm.net_kwargs["num_labels"]} if "num_labels" in dm.net_kwargs else {}


def build_datamodule(cfg: Any) -> Any:
    """The cell's datamodule (given the model's tokenizer, when the model names one), prepared and set up for fit."""
    from hydra.utils import instantiate

    tokenizer = instantiate(cfg.model.tokenizer) if cfg.model.get("tokenizer") else None
    dm = instantiate(cfg.dataset.datamodule, **({"tokenizer": tokenizer} if tokenizer is not None else {}))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def build_net(node: Any, **runtime: Any) -> Any:
    """A network from its `_target_` node and the runtime kwargs (label count, vocabulary) data or the plan give it."""
    from hydra.utils import instantiate

    return instantiate(node, **runtime)


def build_task(cfg: Any, net: Any, dm: Any) -> Any:
    """The cell's task around `net`: its optimiser, scheduler, the datamodule's runtime kwargs and test splits."""
    from hydra.utils import instantiate

    task = instantiate(cfg.dataset.task, net=net, optimizer=instantiate(cfg.optimizer),
                       scheduler=instantiate(cfg.scheduler) if cfg.get("scheduler") else None, **task_kwargs(dm))
    task.test_split_names = list(getattr(dm, "test_splits", ["test"]))
    return task


def build_cell(cfg: Any, data_ready: Callable[[Any], None] | None = None) -> tuple[Any, Any, Any]:
    """(datamodule after setup("fit"), net, task) of a train cell.

    `data_ready(dm)` runs once the data is set up and before the network is built (training checks there that a
    checkpoint it resumes was trained on the same data).
    """
    dm = build_datamodule(cfg)
    if data_ready is not None:
        data_ready(dm)
    net = build_net(cfg.model.net, **dm.net_kwargs)
    return dm, net, build_task(cfg, net, dm)
