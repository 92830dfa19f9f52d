"""A torch Function's forward evaluated at many points in one call (``torch.func.vmap``), for the finite
differences (gradcli.checks.comparisons.numeric batches their stencil points where the target offers ``batch``)."""
from __future__ import annotations

import numpy as np

from gradcli.checks.targets.binding import call_bound
from gradcli.checks.targets.torch_parts import StandInCtx, reseed, to_numpy


def forward_takes_ctx(cls) -> bool:
    # with setup_context overridden, forward takes only the inputs (torch's newer style)
    import torch
    return getattr(cls.setup_context, "__func__", cls.setup_context) is torch.autograd.Function.setup_context


def primal_of(cls, bound):
    """The Function ``cls``'s forward as plain torch code, without its backward: values -> output."""
    if forward_takes_ctx(cls):
        return lambda values: call_bound(lambda *a: cls.forward(StandInCtx(len(a)), *a), bound, values,
                                         keywords=False)
    return lambda values: call_bound(cls.forward, bound, values, keywords=False)


class BatchedCalls:
    """``fn`` (the target in float64, as the numerics call it) with ``batch(points)``: the forward at each
    point, vmapped, with the points on the output's leading axis (raises where vmap cannot run it)."""

    def __init__(self, fn, torch, primal, device: str, seed: int):
        self.fn, self.torch, self.primal, self.device, self.seed = fn, torch, primal, device, seed

    def __call__(self, **kw):
        return self.fn(**kw)

    def batch(self, points: list):
        return vmapped(self.torch, self.primal, points, self.device, self.seed)


def with_batches(target):
    """A torch check's ``target.fn`` (gradcli.checks.targets.torch_target), with batches of its Function's forward
    where one can be had: float64 real inputs, no module, no autocast."""
    if target.cls is None or target.module_names or target.autocast is not None or target.complex:
        return target.fn
    return BatchedCalls(target.fn, target.torch, primal_of(target.cls, target.bound), target.device, target.seed)


#: the input elements (over every point) one vmapped call of a batch takes at most: the points beyond go
#: in further calls, so that a forward's intermediates stay a bounded multiple of this
BATCH_ELEMENTS = 2 ** 22


def vmapped(torch, call, points: list, device: str, seed: int):
    """``call(values)`` (values: name -> tensor) at each of ``points`` (name -> numpy array, float64 where
    floating), through ``torch.func.vmap`` over the floating inputs, a few calls in all -> the output (a
    numpy array, or a tuple of them) with the points as its leading axis. vmap refuses, and this raises,
    where the call branches on a value, leaves torch (numpy, ``.item()``) or draws random numbers; the
    caller then calls the points one by one."""
    first = points[0]
    floats = [k for k, v in first.items() if np.asarray(v).dtype.kind == "f"]
    fixed = {k: torch.as_tensor(np.asarray(v), device=device) for k, v in first.items() if k not in floats}

    def one(*xs):
        return call({**fixed, **dict(zip(floats, xs))})
    size = max(1, sum(int(np.size(first[k])) for k in floats))
    chunk = max(1, BATCH_ELEMENTS // size)
    parts = []
    for start in range(0, len(points), chunk):
        some = points[start:start + chunk]
        stacked = [torch.as_tensor(np.stack([np.asarray(p[k], dtype=np.float64) for p in some]), device=device)
                   for k in floats]
        with torch.no_grad(), torch.random.fork_rng(devices=[] if device == "cpu" else [device]):
            reseed(torch, seed, device)
            parts.append(to_numpy(torch.func.vmap(one, randomness="error")(*stacked)))
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))
    return np.concatenate(parts)
