"""One forward and backward of a kernel or of its reference, in a given dtype, as a model would run it.

A run takes the point (numpy float64, already rounded through the kernel's dtype, so that every run
sees the same numbers) and a cotangent, calls the target under its framework's autograd with the inputs
in ``wrt`` requiring grad, and returns the output and the vector-Jacobian product as float64 numpy.
The criterion that compares the runs is :mod:`gradcli.checks.kernels.criterion`; nothing here judges.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass

import numpy as np

from gradcli.checks.targets.binding import bind, call_bound, selected, signature_parameters
from gradcli.checks.targets import jax_target
from gradcli.checks.targets import torch_target
from gradcli.checks.targets.torch_parts import gradient_of, reseed, rounded, tensor_of, to_numpy


@dataclass(frozen=True)
class Run:
    output: np.ndarray  # float64 (a dtype's values exactly)
    grads: dict  # input name -> float64 array, or None where the framework gave none
    dtype: str  # the dtype the output really came out in


@dataclass(frozen=True)
class Runner:
    """How to run one framework's targets: ``run(target, dtype name, cotangent(shape) -> array)``."""

    framework: str
    inputs: dict  # name -> float64 numpy (the point, rounded through the kernel's dtype)
    wrt: tuple
    device: str
    seed: int
    output: int | None

    def run(self, target, dtype: str, cotangent) -> Run:
        if self.framework == "torch":
            return _torch_run(self, target, dtype, cotangent)
        return _jax_run(self, target, dtype, cotangent)

    def rounded(self, values: dict, dtype: str) -> dict:
        """The point rounded through ``dtype`` and back to float64."""
        if self.framework == "torch":
            import torch
            return {k: rounded(torch, v, getattr(torch, dtype)) for k, v in values.items()}
        import jax.numpy as jnp
        return {k: jax_target.rounded(jnp, v, jnp.dtype(dtype)) for k, v in values.items()}


def module_parameters(target) -> dict:
    """A torch module kernel's parameters that require grad, by name, as float64 numpy (else {}): they are
    inputs of the kernel check, handed to the reference by name."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(target, torch.nn.Module):
        return {}
    return {n: p.detach().cpu().double().numpy() for n, p in target.named_parameters() if p.requires_grad}


def _module_call(torch, module, dtype, device):
    """The module in ``dtype`` on ``device`` (a copy: the user's is never changed) called with its
    parameters given by name among the inputs and its inputs by position, in the order given."""
    names = set(module_parameters(module))
    copied = copy.deepcopy(module).to(device=device, dtype=dtype)

    def call(**values):
        args = tuple(v for k, v in values.items() if k not in names)
        return torch.func.functional_call(copied, {n: values[n] for n in names}, args)
    return call, None, True


def _torch_run(r: Runner, target, dtype: str, cotangent) -> Run:
    import torch
    tdtype = getattr(torch, dtype)
    if isinstance(target, torch.nn.Module):
        call, bound, keywords = _module_call(torch, target, tdtype, r.device)
    else:
        call, params, keywords = torch_target.call_form(target)
        bound = bind(params, list(r.inputs), torch_target.display_name(target))
    with torch.random.fork_rng(devices=[] if r.device == "cpu" else [r.device]), torch.enable_grad():
        reseed(torch, r.seed, r.device)  # a dropout mask drawn from torch's generator is the same in every run
        tensors = {k: tensor_of(torch, v, tdtype, r.device, k in r.wrt) for k, v in r.inputs.items()}
        given = {k: t.clone() if t.requires_grad else t for k, t in tensors.items()}
        out = selected(call(**given) if bound is None and keywords else call_bound(call, bound, given, keywords),
                       r.output)
        out_dtype = str(out.dtype).replace("torch.", "")
        seed_t = torch.as_tensor(cotangent(tuple(out.shape)), device=out.device).to(out.dtype)
        grads = dict.fromkeys(r.wrt)
        if out.requires_grad:
            found = torch.autograd.grad(out, [tensors[k] for k in r.wrt], grad_outputs=seed_t, allow_unused=True)
            grads = {k: None if g is None else gradient_of(g) for k, g in zip(r.wrt, found)}
    return Run(np.asarray(to_numpy(out), dtype=np.float64), grads, out_dtype)


def _jax_run(r: Runner, target, dtype: str, cotangent) -> Run:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    bound = bind(signature_parameters(target), list(r.inputs), jax_target.display_name(target))
    jdtype = jnp.dtype(dtype)
    values = {k: jax_target.array_of(jnp, v, jdtype) for k, v in r.inputs.items()}

    def of_wrt(*moving):
        return selected(call_bound(target, bound, {**values, **dict(zip(r.wrt, moving))}), r.output)

    out, pullback = jax.vjp(of_wrt, *[values[k] for k in r.wrt])
    seed = jnp.asarray(cotangent(tuple(out.shape)), dtype=out.dtype)
    grads = {k: np.asarray(g, dtype=np.float64) for k, g in zip(r.wrt, pullback(seed))}
    return Run(np.asarray(out, dtype=np.float64), grads, str(out.dtype))
