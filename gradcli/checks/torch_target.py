"""PyTorch targets checked as numpy-level checks: a ``torch.autograd.Function`` (or its ``.apply``), an
``nn.Module`` (input and parameter gradients), or a function of tensors (``framework="torch"``).

``fn`` runs the target in float64 on tensors made from the numpy inputs (the reference the numerics
differentiate); the vjp under test is torch's own backward in the dtype under test, under autocast
where asked, so every custom ``backward`` inside the target is what is checked. gradcli does not trace
torch code. Dropout and other randomness draw from a generator reseeded before every call, so the
function the differences see is one function; a module's buffers (BatchNorm's running statistics) are
restored before every call, so they stay constants.
"""
from __future__ import annotations

import copy
import sys

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.binding import bind, call_bound, selected, signature_parameters
from gradcli.checks.torch_parts import (
    LoadedModule, PrimalAD, StandInCtx, dtype_mismatch, function_jvp, overrides, reseed, watched)
from gradcli.checks.under_test import Finding, gradient_as_vjp
from gradcli.checks.context import EPS, Verdict, coarsest

KIND = "torch.autograd.Function or torch.nn.Module"
MISSING = "torch is not installed; this check needs it: pip install 'gradcli[torch]'"
AUTOCAST = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


class BackwardReturnedNone(Finding):
    """The backward gave no gradient for an input whose leaf it is connected to."""


class GradientDtype(Finding):
    """The backward gave a gradient in another dtype than its input's (torch converts it)."""


def _torch():
    return sys.modules.get("torch")  # a Function or Module exists only once torch is imported


def _function_class(fn):
    """The ``torch.autograd.Function`` subclass behind ``fn`` (the class or its ``.apply``), else None."""
    torch = _torch()
    if torch is None:
        return None
    base = torch.autograd.Function
    cls = fn if isinstance(fn, type) else getattr(fn, "__self__", None)
    if isinstance(cls, type) and issubclass(cls, base) and cls is not base:
        return cls
    return None


def _is_module(fn) -> bool:
    torch = _torch()
    return torch is not None and isinstance(fn, torch.nn.Module)


def detects(fn) -> bool:
    return _function_class(fn) is not None or _is_module(fn)


def display_name(fn) -> str:
    cls = _function_class(fn)
    if cls is not None:
        return cls.__name__
    if _is_module(fn):
        return type(fn).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def _parameters(fn):
    cls = _function_class(fn)
    if cls is not None:
        return signature_parameters(cls.forward, drop_first=_forward_takes_ctx(cls))
    if _is_module(fn):
        return signature_parameters(fn.forward)
    return signature_parameters(fn)


def _forward_takes_ctx(cls) -> bool:
    # with setup_context overridden, forward takes only the inputs (torch's newer style)
    import torch
    return getattr(cls.setup_context, "__func__", cls.setup_context) is torch.autograd.Function.setup_context


def _module_parameters(module) -> list:
    """(name, Parameter) for every parameter whose gradient is checked, as named_parameters() names them."""
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad]


def validate(fn, inputs: dict, options: dict) -> None:
    """Raise BadInput for what a torch check cannot take."""
    if _function_class(fn) is None and not callable(fn):
        raise BadInput(f"framework='torch' takes a function of tensors, got {type(fn).__name__}")
    check_options(options)
    if options.get("autocast") is not None and options.get("dtype") not in (None, "float32"):
        raise BadInput("autocast= runs with float32 inputs and parameters; drop dtype=")
    names = list(inputs)
    if _is_module(fn):
        clash = [n for n, _ in _module_parameters(fn) if n in inputs]
        if clash:
            raise BadInput(f"input {clash[0]!r} has the name of a parameter of {display_name(fn)}: rename the input")
    bind(_parameters(fn), names, display_name(fn))


def check_options(options: dict) -> None:
    """BadInput for a ``device`` or ``autocast`` value no torch check can take (also in [tool.gradcli])."""
    device = options.get("device")
    if device is not None and (not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda")):
        raise BadInput(f"device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}")
    autocast = options.get("autocast")
    if autocast is not None and autocast not in AUTOCAST:
        raise BadInput(f"autocast must be 'bf16' or 'fp16', got {autocast!r}")


def as_arrays(inputs: dict) -> dict:
    """Given tensors as float64 numpy arrays (bfloat16 included); shapes and other values untouched."""
    torch = _torch()
    if torch is None:
        return dict(inputs)
    return {k: v.detach().cpu().double().numpy() if isinstance(v, torch.Tensor) and v.is_floating_point()
            else v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def run_dtype_name(fn, options: dict, inputs: dict | None = None) -> str:
    """The dtype the gradient under test is computed in: float32 under autocast, ``dtype=``, a module's
    own dtype, else float64; given ``inputs`` (the spec's own), the coarsest of that and the given
    tensors' float dtypes, which they keep."""
    if options.get("autocast") is not None:
        name = "float32"
    elif options.get("dtype") is not None:
        name = options["dtype"]
    else:
        name = "float64"
        if _is_module(fn):
            dtypes = {str(p.dtype).replace("torch.", "") for p in fn.parameters() if p.is_floating_point()}
            if len(dtypes) == 1:
                name = dtypes.pop()
    torch = _torch()
    given = [str(v.dtype).replace("torch.", "") for v in (inputs or {}).values()
             if torch is not None and isinstance(v, torch.Tensor) and v.is_floating_point()]
    return coarsest(name, *[g for g in given if g in EPS])


def tolerance_dtype(opts: dict, run_dtype: str) -> str:
    """The dtype whose rounding the tolerance allows for: the autocast dtype, else the run dtype."""
    autocast = opts.get("autocast")
    return AUTOCAST[autocast] if autocast is not None else run_dtype


def functions(spec, opts: dict, inputs: dict):
    """-> (fn(**inputs), vjp(g, **inputs), ad_factory, inputs), or the Verdict that ends the check."""
    try:
        import torch
    except ImportError:
        return Verdict("error", MISSING)
    target_fn = spec.fn
    device = opts.get("device") or "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        return Verdict("skipped", f"device={device!r} was asked for, but torch finds no CUDA device here")
    run_dtype = getattr(torch, run_dtype_name(target_fn, opts))
    # a given tensor runs in its own dtype; every other float input in the run dtype
    own = {k: v.dtype for k, v in spec.inputs.items() if isinstance(v, torch.Tensor) and v.is_floating_point()}
    seed = int(opts.get("seed", 0))
    autocast = opts.get("autocast")
    output = opts.get("output")
    bound = bind(_parameters(target_fn), list(spec.inputs), display_name(target_fn))
    cls = _function_class(target_fn)
    inputs = dict(inputs)
    module_names: list = []
    if _is_module(target_fn):
        params = _module_parameters(target_fn)
        module_names = [n for n, _ in params]
        for n, p in params:
            inputs[n] = p.detach().cpu().double().numpy()
        ref_module = copy.deepcopy(target_fn).to(device=device, dtype=torch.float64)
        test_module = copy.deepcopy(target_fn).to(device=device)
        if opts.get("dtype") is not None or autocast is not None:
            test_module = test_module.to(dtype=run_dtype)
        modules = {torch.float64: LoadedModule(torch, ref_module, module_names)}
    else:
        modules = {}
    dtypes = {k: own.get(k, run_dtype) for k in inputs}
    # the point itself in the dtype under test, so that float64 reference and gradient see one point
    inputs = {k: _rounded(torch, v, dtypes[k]) for k, v in inputs.items()}
    call_target = cls.apply if cls is not None else target_fn

    def run(tensors: dict, precision, of=None):
        with torch.random.fork_rng(devices=[] if device == "cpu" else [device]):
            reseed(torch, seed, device)
            if module_names:
                module = modules[precision] if precision in modules else modules.setdefault(
                    precision, LoadedModule(torch, test_module, module_names))
                args = {k: v for k, v in tensors.items() if k not in module_names}
                return module(call_bound, bound, args, {k: tensors[k] for k in module_names})
            return call_bound(of or call_target, bound, tensors, keywords=cls is None)

    def fn(**kw):
        if any(np.iscomplexobj(v) for v in kw.values()):
            raise TypeError("complex step does not apply to a torch check")
        with torch.no_grad():
            tensors = {k: _tensor(torch, v, torch.float64, device, False) for k, v in kw.items()}
            return _to_numpy(run(tensors, torch.float64))

    nondet_tol = float(opts.get("nondet_tol") or 0.0)
    checked = []  # the backward is run twice once per check, on the first call

    def wrt_of(kw):
        return opts.get("wrt") or [k for k, v in kw.items() if np.asarray(v).dtype.kind == "f"]

    def forward(kw, wrt, precision="test", of=None):
        """-> (output, tensors, leaf by wrt name) in the dtype under test (``precision`` "test") or in
        float64 (torch.float64); call under enable_grad."""
        exact = precision is torch.float64
        # a parameter's value is copied into the module's own, which is the leaf
        tensors = {k: _tensor(torch, v, torch.float64 if exact else dtypes.get(k, run_dtype), device,
                              k in wrt and k not in module_names) for k, v in kw.items()}
        # the target gets copies of the leaves, as it would inside a model: a forward that works in
        # place (ctx.mark_dirty) may not write to a leaf that requires grad
        given = {k: t.clone() if t.requires_grad else t for k, t in tensors.items()}
        if autocast is not None and not exact:
            with torch.autocast(device_type=device.split(":")[0], dtype=getattr(torch, AUTOCAST[autocast])):
                out = selected(run(given, precision, of), output)
        else:
            out = selected(run(given, precision, of), output)
        leaf = {k: modules[precision].parameter(k) if k in module_names else tensors[k] for k in wrt}
        return out, tensors, leaf

    def backward(out, seed_t, tensors, wrt, leaf, retain: bool, precision="test") -> dict:
        if module_names:
            return modules[precision].backward(out, seed_t, tensors, wrt, retain)
        grads = torch.autograd.grad(out, [leaf[k] for k in wrt], grad_outputs=seed_t, retain_graph=retain,
                                    allow_unused=True)
        return dict(zip(wrt, grads))

    def vjp_in(precision):
        """torch's backward run in the dtype under test ("test") or in float64 (torch.float64)."""

        def vjp(g, /, **kw):
            wrt = wrt_of(kw)
            with torch.enable_grad():
                out, tensors, leaf = forward(kw, wrt, precision)
                if not isinstance(out, torch.Tensor) or not out.requires_grad:
                    return {k: np.zeros(np.shape(kw[k])) for k in wrt}
                seed_t = _like(torch, g, out)
                reached = _leaves_reached(out)
                again = not checked and precision == "test"
                if again and cls is not None and autocast is None:
                    _check_dtypes(kw, wrt, g)
                grads = backward(out, seed_t, tensors, wrt, leaf, again, precision)
                if again:
                    checked.append(True)
                    _same_again(grads, lambda: backward(out, seed_t, tensors, wrt, leaf, False), nondet_tol)
            dropped = [k for k in wrt if grads[k] is None and id(leaf[k]) in reached]
            if dropped:
                what = "the backward returned None" if not module_names else "the gradient is None (.grad not set)"
                raise BackwardReturnedNone(f"{what} for {', '.join(dropped)} (an input that needs a gradient); "
                                           "return a tensor, or leave it out of wrt=")
            # an input the graph never reaches has the derivative 0 through torch; the numerics test that
            return {k: np.zeros(np.shape(kw[k])) if grads[k] is None else grads[k].detach().cpu().double().numpy()
                    for k in wrt}
        return vjp

    def _check_dtypes(kw, wrt, g):
        """A Finding where the Function's backward returns a gradient in another dtype than its input's."""
        sub, returned = watched(torch, cls)
        args = []
        out, _, leaf = forward(kw, wrt, of=lambda *a: args.append(a) or sub.apply(*a))
        if isinstance(out, torch.Tensor) and out.requires_grad:
            torch.autograd.grad(out, [leaf[k] for k in wrt], grad_outputs=_like(torch, g, out), allow_unused=True)
        order = list(kw) if bound is None else [p.name for p in bound]
        wrong = returned and args and dtype_mismatch(
            torch, args[0], returned[0], {id(a): k for a, k in zip(args[0], order) if k in wrt})
        if wrong:
            raise GradientDtype(wrong)

    own_vjp = vjp_in("test")
    if cls is not None and overrides(torch, cls, "jvp"):
        def jvp(u: dict, /, **kw):
            """torch's forward mode through the Function's jvp, in the dtype under test: J u as numpy."""
            tensors = {k: _tensor(torch, v, dtypes.get(k, run_dtype), device, False) for k, v in kw.items()}
            return function_jvp(torch, lambda t: selected(run(t, "test"), output), tensors, u)
        jvp.label, jvp.method = "torch's jvp", "torch_jvp"
        own_vjp.framework_jvp = jvp

    def double_backward(v: dict, w, /, **kw):
        """What gradgradcheck differentiates: with G = grad(out, x, grad_outputs=w, create_graph=True),
        ({name: grad(G, x, grad_outputs=v)}, grad(G, w, grad_outputs=v)) | a skipped Verdict."""
        wrt = wrt_of(kw)
        with torch.enable_grad():
            out, _, leaf = forward(kw, wrt)
            zeros = ({k: np.zeros(np.shape(kw[k])) for k in wrt}, np.zeros(np.shape(out)))
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                return zeros
            w_t = _like(torch, w, out).requires_grad_(True)
            leaves = [leaf[k] for k in wrt]
            try:
                first = torch.autograd.grad(out, leaves, grad_outputs=w_t, create_graph=True, allow_unused=True)
                # a gradient that autograd does not track is a constant: its derivatives are 0
                live = [(gk, _like(torch, v[k], gk)) for k, gk in zip(wrt, first)
                        if gk is not None and gk.requires_grad]
                if not live:
                    return zeros
                # @once_differentiable hands back gradients whose graph ends in an error node cut off from
                # every input; differentiating them with allow_unused=True would quietly give 0
                ends = {id(t) for t in leaves + [w_t]}
                if any(not (_leaves_reached(a) & ends) for a, _ in live):
                    return Verdict("skipped", _not_twice(display_name(target_fn), None))
                second = torch.autograd.grad([a for a, _ in live], leaves + [w_t], grad_outputs=[b for _, b in live],
                                             allow_unused=True)
            except Exception as exc:  # noqa: BLE001 - torch cannot differentiate this backward
                return Verdict("skipped", _not_twice(display_name(target_fn), exc))
        as_np = [np.zeros(tuple(t.shape)) if s is None else s.detach().cpu().double().numpy()
                 for t, s in zip(leaves + [w_t], second)]
        return dict(zip(wrt, as_np[:-1])), as_np[-1]

    own_vjp.framework_hvp = double_backward
    # order 2 differentiates the gradient in float64: a float32 gradient field is a staircase to the differences
    own_vjp.float64 = vjp_in(torch.float64)

    hand = spec.vjp if spec.vjp is not None else spec.grad

    def hand_vjp(g, **kw):
        """A hand-written vjp or gradient written with tensors, called with tensors -> numpy."""
        tensors = {k: _tensor(torch, v, dtypes.get(k, run_dtype), device, False) for k, v in kw.items()}
        if spec.vjp is not None:
            gt = torch.as_tensor(np.asarray(g, dtype=np.float64), device=device).to(run_dtype)
            return _to_numpy(hand(gt, **tensors), keep=True)
        return gradient_as_vjp(_to_numpy(hand(**tensors), keep=True), g)

    def ad_factory(base, wrt):
        if cls is not None:  # the forward without its backward
            if _forward_takes_ctx(cls):
                primal = lambda values: call_bound(lambda *a: cls.forward(StandInCtx(len(a)), *a), bound, values,
                                                   keywords=False)
            else:
                primal = lambda values: call_bound(cls.forward, bound, values, keywords=False)
            return PrimalAD(torch, primal, base, list(wrt), output, seed, "torch's AD of forward")
        if hand is not None and not module_names:  # torch's own gradient beside the hand-written one
            return PrimalAD(torch, lambda values: call_bound(target_fn, bound, values), base, list(wrt), output,
                             seed, "torch's autograd")
        return None  # a function's or module's own autograd is what is checked: no second opinion

    return fn, own_vjp if hand is None else hand_vjp, ad_factory, inputs


def _same_again(grads: dict, again, tol: float) -> None:
    """A Finding where the backward, run again with the same cotangent, raises or moves by more than ``tol``."""
    why = "torch's backward is not deterministic: it changes saved state or depends on call order"
    cause = "a backward that changes a saved tensor in place is the common cause"
    try:
        second = again()
    except Exception as exc:  # noqa: BLE001 - a backward that cannot run twice
        raise Finding(f"{why} (run a second time with the same cotangent it raised {type(exc).__name__}: "
                      f"{_first_line(exc)}); {cause}") from None
    for k, a in grads.items():
        b = second[k]
        diff = 0.0 if a is None and b is None else float("inf") if a is None or b is None else float(
            torch_gap(a.detach().cpu().double(), b.detach().cpu().double()))
        if diff > tol:
            raise Finding(f"{why} (run twice with the same cotangent, its gradient for {k} differs by up to "
                          f"{diff:.3g}, nondet_tol={tol:g}); {cause}; nondet_tol= allows a difference that is "
                          "expected (atomic adds on a GPU)")


def torch_gap(a, b):
    """The largest |a - b| where they are not equal (NaN where both are NaN is equal; NaN beside a number: inf)."""
    same = (a == b) | (a.isnan() & b.isnan())
    return 0.0 if bool(same.all()) else (a - b).abs().nan_to_num(nan=float("inf"))[~same].max()


def _first_line(exc: Exception) -> str:
    return str(exc).split(". Hint:")[0].splitlines()[0] if str(exc) else type(exc).__name__


def _not_twice(name: str, exc: Exception | None) -> str:
    """Why order 2 is skipped: torch cannot differentiate ``name``'s backward (``exc``: what it raised)."""
    why = ("its backward is marked @once_differentiable" if exc is None or "once_differentiable" in str(exc)
           else f"differentiating its backward raised {type(exc).__name__}: {_first_line(exc)}")
    return (f"first order passed; order 2 is not checked: torch cannot differentiate the backward of {name} "
            f"({why}), so it has no second derivatives to check")


def _rounded(torch, v, dtype):
    """``v`` (a numpy array) rounded through ``dtype`` and back to float64: the point under test."""
    a = np.asarray(v)
    if a.dtype.kind != "f":
        return a
    return torch.from_numpy(np.array(a, dtype=np.float64)).to(dtype).double().numpy()


def _like(torch, a, t):
    """The numpy array ``a`` as a tensor of ``t``'s shape, dtype and device."""
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=t.device).to(t.dtype).reshape(t.shape)


def _tensor(torch, v, dtype, device, requires_grad: bool):
    """``v`` as a tensor; the pipeline hands every call copies, so the tensor may share their memory (a
    1e6-parameter module's values are not copied three times per call)."""
    a = np.asarray(v)
    if a.dtype.kind != "f":  # integers and booleans are constants
        return torch.as_tensor(a, device=device)
    t = torch.from_numpy(a if a.dtype == np.float64 and a.flags.writeable else a.astype(np.float64))
    t = t.to(device=device, dtype=dtype)
    return t.requires_grad_(requires_grad)


def _to_numpy(out, keep: bool = False):
    """Tensors (in tuples and lists, and with ``keep`` in dicts) as float64 numpy arrays."""
    if keep and isinstance(out, dict):
        return {k: _to_numpy(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return tuple(_to_numpy(o) for o in out)
    if hasattr(out, "detach"):
        t = out.detach().cpu()
        return (t.double() if t.is_floating_point() else t).numpy()
    return np.asarray(out)


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
