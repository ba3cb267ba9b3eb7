"""Memory of a stage: the tensors saved for backward, AMP training's peak, the accumulation that fits."""

from __future__ import annotations

import unittest.mock
from typing import Any


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
