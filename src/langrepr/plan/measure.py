"""One workload measured at batch 1 on CPU: parameters, FLOPs of a step and of a forward, saved activations."""

from __future__ import annotations

import functools
import gc
from typing import Any

from langrepr.plan.memory import saved_activation_bytes
from langrepr.plan.workload import Workload

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
