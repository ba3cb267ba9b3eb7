"""Best-so-far trackers that survive a resume: `val/<metric>_best` is identical after kill -9 and ckpt_path=auto.

A task's `MinMetric`/`MaxMetric` (and first values such as `val_ppl_first`) are not part of the model's
`state_dict` (torchmetrics states are not persistent by default), so a resumed run used to start them afresh:
its "best" covered only the epochs after the resume point (issue 21: PTB `val/nll_best` 6.9789 resumed against
6.9391 uninterrupted). `KeepsTrackers` writes them into every checkpoint under `checkpoint["langrepr_trackers"]`
and reads them back when a checkpoint is loaded. A checkpoint written before this existed has no such entry
and loads as before (the trackers start afresh).

Kept out of the `state_dict` on purpose: the weights of a checkpoint stay loadable by `load_state_dict` with
`strict=True` into a task built by older or newer code, and fine-tuning from a pretraining checkpoint does not
inherit its validation history.
"""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import Metric

CHECKPOINT_KEY = "langrepr_trackers"


def tracker_state(value: Any) -> Any:
    """A tracker as plain tensors and numbers (loadable with torch.load(weights_only=True))."""
    if isinstance(value, Metric):
        return {"metric_state": {k: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v
                                 for k, v in value.metric_state.items()},
                "update_count": int(value._update_count)}
    return {"value": value}


def restore_tracker(owner: Any, name: str, state: Any) -> None:
    """Put a saved tracker back on `owner.<name>` (a Metric: on the device it lives on now)."""
    current = getattr(owner, name)
    if isinstance(current, Metric):
        for key, saved in state["metric_state"].items():
            here = getattr(current, key)
            setattr(current, key, saved.to(here.device, here.dtype) if isinstance(here, torch.Tensor) else saved)
        current._update_count = int(state["update_count"])
        current._computed = None                # compute() must read the restored state, not a cached result
    else:
        setattr(owner, name, state["value"])


class KeepsTrackers:
    """Mixin for a LightningModule: the attributes named in `tracked` go into every checkpoint and come back."""

    tracked: tuple[str, ...] = ()

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)  # type: ignore[misc]
        checkpoint[CHECKPOINT_KEY] = {name: tracker_state(getattr(self, name)) for name in self.tracked}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)  # type: ignore[misc]
        saved = checkpoint.get(CHECKPOINT_KEY) or {}
        for name in self.tracked:
            if name in saved:
                restore_tracker(self, name, saved[name])
