"""What a torch check is built from besides its target: a module's copy loaded with the check's values,
the stand-in ``ctx`` and torch's AD of a Function's forward (the reference beside the finite
differences), the generators reseeded before every call, the jvp run through forward_ad, what torch
says of a backward run twice or differentiated (reentrance, once_differentiable), and the conversions
between the pipeline's numpy arrays and tensors (complex ones included)."""
from __future__ import annotations

import numpy as np

from gradcli.checks.targets.binding import selected
from gradcli.checks.comparisons.under_test import Finding


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
        values = {k: torch.tensor(_exact(v), requires_grad=k in wrt) for k, v in base.items()}
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
        seed = torch.as_tensor(_exact(w)).reshape(self.out.shape)
        grads = torch.autograd.grad(self.out, self.leaves, grad_outputs=seed, retain_graph=True, allow_unused=True)
        return {k: np.zeros(tuple(leaf.shape)) if g is None else g.detach().numpy()
                for k, leaf, g in zip(self.wrt, self.leaves, grads)}

    def gradient(self) -> dict:
        return self.vjp(np.ones(self.value.shape))


def _exact(v) -> np.ndarray:
    """``v`` as float64 (complex128 where complex; integers as they are)."""
    a = np.asarray(v)
    return a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64) if a.dtype.kind == "f" else a


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
            if g.is_floating_point() or g.is_complex():
                why = ("losing precision" if a.element_size() > g.element_size() else
                       "so the backward's extra precision is not what reaches the input")
            else:  # whatever its width, an integer (or bool) gradient has no fraction to hand on
                why = "but it is an integer gradient: every fraction was lost in the backward"
            article = "an" if got[0] in "aeio" else "a"
            return (f"the backward returned {article} {got} gradient for {names[id(a)]}, a {want} input: torch "
                    f"converts it, {why} (return the gradient in its input's dtype)")
    return None


def function_jvp(torch, run, tensors: dict, tangents: dict):
    """J u of ``run(tensors)`` (a Function's apply) by torch's forward-mode AD, its ``jvp`` rule, called as a
    user calls it: dual tensors made with ``forward_ad.make_dual`` from the inputs (copies of those that
    require grad, as a model's activations are) and tangents of their own (no view of anything, as
    ``torch.randn_like`` gives), so that torch's own checks of the rule (a forward returning an input as-is
    needs a jvp returning a view) run. ``tangents``: numpy, by name -> numpy (zeros where none comes out)."""
    import torch.autograd.forward_ad as fwad

    def tangent(k, t):
        a = np.asarray(tangents[k])
        a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64).reshape(t.shape)
        return torch.tensor(a, device=t.device).to(t.dtype)

    with fwad.dual_level():
        duals = {k: fwad.make_dual(t.clone() if t.requires_grad else t, tangent(k, t)) if k in tangents else t
                 for k, t in tensors.items()}
        out = run(duals)
        tangent_out = fwad.unpack_dual(out).tangent
        if tangent_out is None:
            return np.zeros(tuple(out.shape))
        return gradient_of(tangent_out)


#: the most outputs a node is offered before the probe gives up on it
_MOST_OUTPUTS = 64


def raise_if_once_differentiable(live) -> None:
    """Raise torch's own error where a gradient comes from a backward marked @once_differentiable.

    Such a gradient hangs off a node that raises when run, cut off from every input, so that the double
    backward quietly leaves the inputs without a gradient. Each node the gradients hang off is applied
    directly (no engine, so no .grad anywhere is touched) with their cotangents in their slots, so that
    torch says what it is; a gradient that is merely constant in the inputs raises nothing."""
    nodes = {}
    for a, b in live:
        if a.grad_fn is not None:
            nodes.setdefault(id(a.grad_fn), (a.grad_fn, {}))[1][a.output_nr] = b
    for node, slots in nodes.values():
        args = [slots.get(i) for i in range(max(slots) + 1)]
        for _ in range(_MOST_OUTPUTS):
            try:
                node(*args)
                break
            except TypeError:  # the node has more outputs than gradients found here: the rest get none
                args.append(None)
            except RuntimeError as exc:
                # only torch's own refusal says so: a node may refuse a direct call for its own reasons
                if "once_differentiable" in str(exc):
                    raise
                break


def same_again(grads: dict, again, tol: float, what: str = "torch's backward") -> None:
    """A Finding where the backward, run again on the same graph with the same cotangent, raises or moves
    by more than ``tol``."""
    why = f"{what} is not deterministic: it changes saved state or depends on call order"
    cause = "a backward that changes a saved tensor in place is the common cause"
    try:
        second = again()
    except Exception as exc:  # noqa: BLE001 - a backward that cannot run twice
        raise Finding(f"{why} (run a second time with the same cotangent it raised {type(exc).__name__}: "
                      f"{first_line(exc)}); {cause}") from None
    for k, a in grads.items():
        b = second[k]
        diff = 0.0 if a is None and b is None else float("inf") if a is None or b is None else _gap(
            gradient_of(a), gradient_of(b))
        if diff > tol:
            raise Finding(f"{why} (run twice with the same cotangent, its gradient for {k} differs by up to "
                          f"{diff:.3g}, nondet_tol={tol:g}); {cause}; nondet_tol= allows a difference that is "
                          "expected (atomic adds on a GPU)")


def _gap(a: np.ndarray, b: np.ndarray) -> float:
    """The largest |a - b| where they are not equal (NaN beside NaN is equal; NaN beside a number: inf)."""
    with np.errstate(invalid="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        return 0.0 if bool(same.all()) else float(np.nan_to_num(np.abs(a - b), nan=np.inf)[~same].max())


def first_line(exc: Exception) -> str:
    return str(exc).split(". Hint:")[0].splitlines()[0] if str(exc) else type(exc).__name__


def rounded(torch, v, dtype):
    """``v`` (a numpy array) rounded through ``dtype`` and back to float64 (complex128): the point under test."""
    a = np.asarray(v)
    if a.dtype.kind == "c":
        return rounded(torch, a.real, dtype) + 1j * rounded(torch, a.imag, dtype)
    if a.dtype.kind != "f":
        return a
    return torch.from_numpy(np.array(a, dtype=np.float64)).to(_real_dtype(torch, dtype)).double().numpy()


def _real_dtype(torch, dtype):
    return getattr(torch, torch.finfo(dtype).dtype) if dtype.is_complex else dtype


def _complex_dtype(torch, dtype):
    """The complex dtype whose parts are ``dtype`` (bfloat16 has none: complex64)."""
    if dtype.is_complex:
        return dtype
    return {torch.float64: torch.complex128, torch.float16: torch.complex32}.get(dtype, torch.complex64)


def like(torch, a, t):
    """The numpy array ``a`` as a tensor of ``t``'s shape, dtype and device."""
    a = np.asarray(a)
    a = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return torch.as_tensor(a, device=t.device).to(t.dtype).reshape(t.shape)


def tensor_of(torch, v, dtype, device, requires_grad: bool):
    """``v`` as a tensor; the pipeline hands every call copies, so the tensor may share their memory (a
    1e6-parameter module's values are not copied three times per call)."""
    a = np.asarray(v)
    if a.dtype.kind == "c":
        t = torch.from_numpy(np.array(a, dtype=np.complex128)).to(device=device, dtype=_complex_dtype(torch, dtype))
        return t.requires_grad_(requires_grad)
    if a.dtype.kind != "f":  # integers and booleans are constants
        return torch.as_tensor(a, device=device)
    t = torch.from_numpy(a if a.dtype == np.float64 and a.flags.writeable else a.astype(np.float64))
    t = t.to(device=device, dtype=_real_dtype(torch, dtype))
    return t.requires_grad_(requires_grad)


def to_numpy(out, keep: bool = False):
    """Tensors (in tuples and lists, and with ``keep`` in dicts) as numpy arrays of their own dtype (bfloat16,
    which numpy lacks, as float32), so that an output whose dtype changes shows it."""
    if keep and isinstance(out, dict):
        return {k: to_numpy(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return tuple(to_numpy(o) for o in out)
    if hasattr(out, "detach"):
        t = out.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return np.asarray(out)


def gradient_of(t) -> np.ndarray:
    """A gradient tensor as float64 (complex128) numpy."""
    t = t.detach().cpu()
    return (t.cdouble() if t.is_complex() else t.double()).numpy()


def functions_in(torch, out) -> list:
    """The torch.autograd.Function classes whose backward the graph of ``out`` runs, in the order met."""
    found, seen, todo = [], set(), [getattr(t, "grad_fn", None) for t in (out if isinstance(out, (tuple, list))
                                                                           else (out,))]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        cls = getattr(node, "_forward_cls", None)
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
        todo.extend(n for n, _ in node.next_functions)
    return found


class ForwardRules:
    """While entered, every Function in ``classes`` is differentiated by torch's autograd of its forward
    (its inputs kept on ctx): a reference independent of the backwards inside a function or module."""

    def __init__(self, torch, classes: list, takes_ctx):
        self.torch, self.classes, self.takes_ctx, self.saved = torch, classes, takes_ctx, []

    def __enter__(self):
        for cls in self.classes:
            own = {k: cls.__dict__[k] for k in ("forward", "setup_context", "backward", "vjp") if k in cls.__dict__}
            self.saved.append((cls, own))
            forward = cls.forward
            if self.takes_ctx(cls):
                def keep(ctx, *args, _f=forward):
                    ctx.gradcli_args = args
                    return _f(ctx, *args)
                cls.forward = staticmethod(keep)
                primal = lambda *a, _f=forward: _f(StandInCtx(len(a)), *a)
            else:
                setup = cls.setup_context

                def keep_setup(ctx, inputs, output, _s=setup):
                    ctx.gradcli_args = tuple(inputs)
                    return _s(ctx, inputs, output)
                cls.setup_context = staticmethod(keep_setup)
                primal = forward
            cls.backward = staticmethod(lambda ctx, *g, _p=primal: self._backward(_p, ctx.gradcli_args, g))
            cls.vjp = staticmethod(self.torch.autograd.Function.vjp)  # torch refuses a class with both
        return self

    def __exit__(self, *exc):
        for cls, own in reversed(self.saved):
            for k in ("forward", "setup_context", "backward", "vjp"):
                if k in own:
                    setattr(cls, k, own[k])
                elif k in cls.__dict__:
                    delattr(cls, k)
        self.saved = []

    def _backward(self, primal, args, grads):
        torch = self.torch
        with torch.enable_grad():
            ins = [a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                   for a in args]
            out = primal(*ins)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            pairs = [(o, g) for o, g in zip(outs, grads)
                     if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
            live = [a for a in ins if isinstance(a, torch.Tensor) and a.requires_grad]
            got = iter(torch.autograd.grad([o for o, _ in pairs], live, [g for _, g in pairs], allow_unused=True)
                       if pairs and live else [None] * len(live))
        return tuple(next(got) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in ins)


class RulesAD:
    """A PrimalAD whose backward sweeps run with the ForwardRules that built it in place."""

    method = PrimalAD.method

    def __init__(self, ad, rules):
        self.ad, self.rules, self.label, self.value = ad, rules, ad.label, ad.value

    def vjp(self, w) -> dict:
        with self.rules:
            return self.ad.vjp(w)

    def gradient(self) -> dict:
        with self.rules:
            return self.ad.gradient()


def forward_rules_ad(torch, out, target, base: dict, wrt: list, output, seed: int, takes_ctx):
    """torch's autograd of ``target`` with the backward of every Function in ``out``'s graph replaced by
    autograd of its forward (a RulesAD), or None where the graph runs no Function's backward."""
    classes = functions_in(torch, out)
    if not classes:
        return None
    rules = ForwardRules(torch, classes, takes_ctx)
    label = f"torch's autograd with the forward of {', '.join(c.__name__ for c in classes)} differentiated"
    with rules:
        ad = PrimalAD(torch, target, base, wrt, output, seed, label)
    return RulesAD(ad, rules)


def dtypes_made(torch, run) -> set:
    """The float dtypes of what ``run()`` makes under autograd: its outputs and every tensor saved for
    the backward (an operation autocast lowered saves its lowered operands)."""
    seen = set()

    def pack(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            seen.add(str(t.dtype).replace("torch.", ""))
        return t
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    for t in out if isinstance(out, (tuple, list)) else (out,):
        pack(t)
    return seen
