"""What a torch check is built from besides its target: a module's copy loaded with the check's values,
the stand-in ``ctx`` and torch's AD of a Function's forward (the reference beside the finite
differences), and the generators reseeded before every call."""
from __future__ import annotations

import numpy as np

from gradcli.checks.binding import selected


class PrimalUnavailable(Exception):
    """torch's AD of a Function's forward cannot be had (an in-place forward, one that leaves autograd)."""


class StandInCtx:
    """What a Function's ``forward`` may call on ``ctx`` when it runs as plain torch code under autograd."""

    def __init__(self, n: int):
        self.needs_input_grad = (True,) * n
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        raise PrimalUnavailable("the forward changes its inputs in place (ctx.mark_dirty)")

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = value


class PrimalAD:
    """torch's autograd of a Function's ``forward`` run as plain code (its ``backward`` left out), or of
    a function whose hand-written gradient is under test: a reference independent of the rule under
    test, which the pipeline trusts only where it agrees with the finite differences."""

    method = "torch_autograd"

    def __init__(self, torch, primal, base: dict, wrt: list, output, seed: int, label: str):
        self.torch, self.wrt, self.label = torch, wrt, label
        values = {k: torch.tensor(np.array(v, dtype=np.float64) if np.asarray(v).dtype.kind == "f" else v,
                                  requires_grad=k in wrt) for k, v in base.items()}
        self.leaves = [values[k] for k in wrt]
        with torch.enable_grad(), torch.random.fork_rng(devices=[]):
            reseed(torch, seed, "cpu")
            # copies of the leaves, as for the rule under test: a forward may work in place
            out = primal({k: t.clone() if t.requires_grad else t for k, t in values.items()})
        out = selected(out, output)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            raise PrimalUnavailable("the forward leaves autograd (numpy, .detach(), torch.no_grad())")
        self.out = out
        self.value = out.detach().numpy()

    def vjp(self, w) -> dict:
        torch = self.torch
        seed = torch.as_tensor(np.asarray(w, dtype=np.float64)).reshape(self.out.shape)
        grads = torch.autograd.grad(self.out, self.leaves, grad_outputs=seed, retain_graph=True, allow_unused=True)
        return {k: np.zeros(tuple(leaf.shape)) if g is None else g.detach().numpy()
                for k, leaf, g in zip(self.wrt, self.leaves, grads)}

    def gradient(self) -> dict:
        return self.vjp(np.ones(self.value.shape))


class LoadedModule:
    """A module copy whose parameters are set from the check's values before each call."""

    def __init__(self, torch, module, names):
        self.torch, self.module, self.names = torch, module, names
        own = dict(module.named_parameters())
        self.params = [own[n] for n in names]
        self.buffers = [(b, b.detach().clone()) for b in module.buffers()]

    def __call__(self, call_bound, bound, args: dict, values: dict):
        torch = self.torch
        with torch.no_grad():
            for p, n in zip(self.params, self.names):
                p.copy_(values[n].to(p.dtype))
            for b, saved in self.buffers:  # buffers are constants of the check
                b.copy_(saved)
        for p in self.params:
            p.grad = None  # torch accumulates into .grad: every call starts from none
        return call_bound(self.module, bound, args)

    def parameter(self, name):
        return self.params[self.names.index(name)]

    def backward(self, out, seed, tensors: dict, wrt, retain: bool = False) -> dict:
        """``out.backward(seed)`` from ``.grad`` None, then each parameter's ``.grad`` and each input's."""
        for t in self.params + [tensors[k] for k in wrt if k not in self.names]:
            t.grad = None
        out.backward(seed, retain_graph=retain)
        grads = {n: p.grad for n, p in zip(self.names, self.params) if n in wrt}
        grads.update({k: tensors[k].grad for k in wrt if k not in self.names})
        return grads


def reseed(torch, seed: int, device: str) -> None:
    # the generators themselves: torch.manual_seed also queues a CUDA seed, recording a stack trace
    # each time where CUDA is not started, which made a check's calls ten times slower
    torch.random.default_generator.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)


def overrides(torch, cls, name: str) -> bool:
    """``cls`` (a Function subclass) defines its own ``name`` (jvp, vjp) rather than torch's default."""
    base = getattr(torch.autograd.Function, name)
    return getattr(getattr(cls, name), "__func__", getattr(cls, name)) is not getattr(base, "__func__", base)


def watched(torch, cls):
    """A subclass of the Function ``cls`` that records what ``cls``'s backward returns -> (subclass, list of
    returned tuples). torch converts each gradient to its input's dtype before any hook on the node sees it,
    so only the backward itself shows a gradient in the wrong dtype."""
    returned = []
    name = "vjp" if overrides(torch, cls, "vjp") else "backward"
    inner = getattr(cls, name)

    def backward(ctx, *grads):
        out = inner(ctx, *grads)
        returned.append(out if isinstance(out, tuple) else (out,))
        return out
    return type(cls.__name__, (cls,), {name: staticmethod(backward)}), returned


def dtype_mismatch(torch, args: tuple, returned: tuple, names: dict) -> str | None:
    """What is wrong where a backward returned a gradient of another dtype than its input's (``args``: the
    inputs given to apply, ``names``: id(tensor) -> input name), else None."""
    for a, g in zip(args, returned):
        if isinstance(a, torch.Tensor) and isinstance(g, torch.Tensor) and a.is_floating_point() \
                and g.dtype != a.dtype and id(a) in names:
            got, want = (str(t).replace("torch.", "") for t in (g.dtype, a.dtype))
            return (f"the backward returned a {got} gradient for {names[id(a)]}, a {want} input: torch converts "
                    f"it, " + ("losing precision" if a.element_size() > g.element_size() else
                               "so the backward's extra precision is not what reaches the input")
                    + " (return the gradient in its input's dtype)")
    return None


def function_jvp(torch, run, tensors: dict, tangents: dict):
    """J u of ``run(tensors)`` (a Function's apply) by torch's forward-mode AD, its ``jvp`` rule: dual
    tensors of ``tensors`` with ``tangents`` (numpy, by name) -> numpy (zeros where no tangent comes out)."""
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        duals = {k: fwad.make_dual(t, torch.as_tensor(np.asarray(tangents[k], dtype=np.float64), device=t.device)
                                   .to(t.dtype).reshape(t.shape)) if k in tangents else t
                 for k, t in tensors.items()}
        out = run(duals)
        tangent = fwad.unpack_dual(out).tangent
        if tangent is None:
            return np.zeros(tuple(out.shape))
        return tangent.detach().cpu().double().numpy()
