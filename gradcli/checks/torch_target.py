"""PyTorch targets: a ``torch.autograd.Function`` (or its ``.apply``), or a function of tensors registered
with ``framework="torch"``, checked as a numpy-level check.

The check's function runs the target's forward in float64 on tensors made from the numpy inputs and
hands back its output as numpy; the vjp under test is torch's own backward,
``torch.autograd.grad(out, inputs, grad_outputs=g)``, so a custom Function's ``backward`` is what is
checked. gradcli does not trace torch code: the finite differences are the reference.

Inputs bind to the target's parameters by name where its signature names them all (for a Function,
its ``forward`` less ``ctx``), otherwise by position in the order they were given. torch is imported
only when a torch check runs, never when gradcli is imported.
"""
from __future__ import annotations

import inspect
import sys

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.context import Verdict

FRAMEWORKS = ("numpy", "torch")
MISSING = "torch is not installed; this check needs it: pip install 'gradcli[torch]'"


class BackwardReturnedNone(Exception):
    """The backward gave no gradient for an input whose leaf it is connected to."""


def _function_class(fn):
    """The ``torch.autograd.Function`` subclass behind ``fn`` (the class or its ``.apply``), else None."""
    torch = sys.modules.get("torch")  # a Function subclass exists only once torch is imported
    if torch is None:
        return None
    base = torch.autograd.Function
    cls = fn if isinstance(fn, type) else getattr(fn, "__self__", None)
    if isinstance(cls, type) and issubclass(cls, base) and cls is not base:
        return cls
    return None


def framework_of(fn, options: dict) -> str:
    """"torch" for a Function subclass or its ``.apply``, or ``framework="torch"``; else "numpy"."""
    framework = options.get("framework")
    cls = _function_class(fn)
    if cls is not None and framework == "numpy":
        raise BadInput(f"{cls.__name__} is a torch.autograd.Function: framework='numpy' cannot check it")
    return "torch" if cls is not None or framework == "torch" else "numpy"


def display_name(fn) -> str:
    cls = _function_class(fn)
    return cls.__name__ if cls is not None else getattr(fn, "__name__", type(fn).__name__)


def _parameters(fn):
    """The named parameters inputs may bind to -> list of inspect.Parameter, or None where unknown."""
    cls = _function_class(fn)
    target = cls.forward if cls is not None else fn
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):  # builtins such as torch.sin
        return None
    if cls is not None and _forward_takes_ctx(cls) and params:
        params = params[1:]
    return params


def _forward_takes_ctx(cls) -> bool:
    # with setup_context overridden, forward takes only the inputs (torch's newer style)
    import torch
    return getattr(cls.setup_context, "__func__", cls.setup_context) is torch.autograd.Function.setup_context


def _binding(fn, names: list):
    """How inputs reach the target -> the parameter list to bind by name, or None for positional."""
    params = _parameters(fn)
    if params is None:
        return None
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    if all(n in {p.name for p in named} for n in names):
        missing = [p.name for p in named if p.default is p.empty and p.name not in names]
        if missing:
            raise BadInput(f"no value for parameter {missing[0]!r} of {display_name(fn)}: "
                           f"pass {missing[0]}=value or a shape such as {missing[0]}=(3,)")
        return named
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    unknown = next(n for n in names if n not in {p.name for p in named})
    raise BadInput(f"{display_name(fn)} has no parameter {unknown!r} "
                   f"(its parameters: {', '.join(p.name for p in named) or 'none'})")


def validate(fn, inputs: dict, options: dict, grad=None, vjp=None, hvp=None) -> None:
    """Raise BadInput for what a torch check cannot take (registration and run both call this)."""
    what = display_name(fn)
    if grad is not None or vjp is not None or hvp is not None:
        raise BadInput(f"{what} is checked against torch's own backward: drop grad=/vjp=/hvp=")
    if options.get("with_grad"):
        raise BadInput("with_grad=True does not apply to a torch check (torch's backward is checked)")
    if options.get("dtype") is not None and np.dtype(options["dtype"]).name != "float64":
        raise BadInput("a torch check runs in float64; dtype=float32 is not supported for torch yet")
    if _function_class(fn) is None and not callable(fn):
        raise BadInput(f"framework='torch' takes a function of tensors, got {type(fn).__name__}")
    _binding(fn, list(inputs))


def torch_functions(spec, opts: dict, inputs: dict):
    """-> (fn(**inputs), vjp(g, **inputs), ad_factory) for the check pipeline, or the Verdict that ends
    the check (torch missing, complex inputs)."""
    try:
        import torch
    except ImportError:
        return Verdict("error", MISSING)
    validate(spec.fn, spec.inputs, opts, spec.grad, spec.vjp, spec.hvp)
    complex_inputs = [k for k, v in inputs.items() if v.dtype.kind == "c"]
    if complex_inputs:
        return Verdict("skipped", f"complex inputs to a torch check are not checked yet ({', '.join(complex_inputs)})")
    bound = _binding(spec.fn, list(spec.inputs))
    cls = _function_class(spec.fn)
    target = cls.apply if cls is not None else spec.fn
    output = opts.get("output")

    def run(tensors: dict):
        if bound is None:
            return target(*tensors.values())
        if cls is None:
            return target(**tensors)
        # Function.apply takes no keywords: the forward's order, its defaults where not given
        return target(*[tensors[p.name] if p.name in tensors else p.default for p in bound])

    def fn(**kw):
        if any(np.iscomplexobj(v) for v in kw.values()):
            raise TypeError("complex step does not apply to a torch check")
        with torch.no_grad():
            return _to_numpy(run(_tensors(torch, kw, ())))

    def vjp(g, **kw):
        wrt = opts.get("wrt") or [k for k, v in kw.items() if np.asarray(v).dtype.kind == "f"]
        tensors = _tensors(torch, kw, wrt)
        with torch.enable_grad():
            out = _selected(run(tensors), output)
            leaves = [tensors[k] for k in wrt]
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                return {k: np.zeros(np.shape(kw[k])) for k in wrt}
            seed = torch.as_tensor(np.asarray(g), dtype=out.dtype).reshape(out.shape)
            grads = torch.autograd.grad(out, leaves, grad_outputs=seed, allow_unused=True)
        reached = _leaves_reached(out)
        dropped = [k for k, leaf, gr in zip(wrt, leaves, grads) if gr is None and id(leaf) in reached]
        if dropped:
            raise BackwardReturnedNone(f"the backward returned None for {', '.join(dropped)} (an input that "
                                       "needs a gradient); return a tensor, or leave it out of wrt=")
        # an input the graph never reaches has the derivative 0 through torch; the numerics test that
        return {k: np.zeros(np.shape(kw[k])) if gr is None else gr.detach().cpu().numpy()
                for k, gr in zip(wrt, grads)}

    return fn, vjp, lambda base, wrt: None


def _tensors(torch, kw: dict, wrt) -> dict:
    out = {}
    for k, v in kw.items():
        a = np.array(v)
        if a.dtype.kind == "f":
            out[k] = torch.tensor(a.astype(np.float64), requires_grad=k in wrt)
        else:  # integers and booleans are constants
            out[k] = torch.as_tensor(a)
    return out


def _to_numpy(out):
    if isinstance(out, (tuple, list)):
        return tuple(_to_numpy(o) for o in out)
    if hasattr(out, "detach"):
        return out.detach().cpu().numpy()
    return np.asarray(out)


def _selected(out, output):
    if isinstance(out, (tuple, list)):
        return out[0 if output is None else output]
    return out


def _leaves_reached(out) -> set:
    """id() of every leaf tensor whose AccumulateGrad node the graph of ``out`` reaches."""
    seen, stack, found = set(), [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            found.add(id(var))
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return found
