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
import re
import sys

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.targets.binding import bind, call_bound, selected, signature_parameters
from gradcli.checks.targets.torch_parts import (
    LoadedModule, PrimalAD, dtype_mismatch, dtypes_made, first_line, forward_rules_ad, function_jvp,
    gradient_of, like, overrides,
    raise_if_once_differentiable, reseed, rounded, same_again, tensor_of, to_numpy, watched)
from gradcli.checks.targets.torch_batch import forward_takes_ctx as _forward_takes_ctx, primal_of, with_batches
from gradcli.checks.comparisons.under_test import Finding, gradient_as_vjp
from gradcli.checks.context import EPS, Verdict, coarsest

KIND = "torch.autograd.Function or torch.nn.Module"
#: complex inputs are taken (checked as real and imaginary parts: gradcli.checks.targets.complex_inputs)
COMPLEX = True
MISSING = "torch is not installed; this check needs it: pip install 'gradcli[torch]'"
AUTOCAST = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


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


def call_form(fn):
    """(what to call, its parameters or None, whether inputs go by keyword): ``fn`` run as a model runs it,
    a Function through ``apply`` (by position), a module or a function as it is."""
    cls = _function_class(fn)
    return (cls.apply if cls is not None else fn), _parameters(fn), cls is None


def _parameters(fn):
    cls = _function_class(fn)
    if cls is not None:
        return signature_parameters(cls.forward, drop_first=_forward_takes_ctx(cls))
    if _is_module(fn):
        return signature_parameters(fn.forward)
    return signature_parameters(fn)


def _module_parameters(module) -> list:
    """(name, Parameter) for every parameter whose gradient is checked, as named_parameters() names them."""
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad]


def _uninitialized(torch, target) -> str:
    """The names of a module's lazy (uninitialized) parameters and buffers, or ''."""
    if not _is_module(target):
        return ""
    is_lazy = torch.nn.parameter.is_lazy
    names = [n for n, p in (*target.named_parameters(), *target.named_buffers()) if is_lazy(p)]
    return ", ".join(names)


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
    # torch parses a device only when a tensor is made on it: "cuda:abc" would pass here and be skipped
    # without CUDA, or fail blaming the function with it
    if device is not None and (not isinstance(device, str) or not re.fullmatch(r"(cpu|cuda)(:[0-9]+)?", device)):
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
    # a complex tensor rounds as its parts do (complex64: float32)
    given = [str(torch.finfo(v.dtype).dtype if v.is_complex() else v.dtype).replace("torch.", "")
             for v in (inputs or {}).values()
             if torch is not None and isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())]
    return coarsest(name, *[g for g in given if g in EPS])


def tolerance_dtype(opts: dict, run_dtype: str, vjp=None) -> str:
    """The dtype whose rounding the tolerance allows for: under autocast the coarsest dtype the target's
    operations really ran in (``vjp.ran_in``; autocast leaves most operations in float32, and the autocast
    dtype's tolerance would pass their wrong rules), else the autocast dtype; without it the run dtype."""
    autocast = opts.get("autocast")
    if autocast is None:
        return run_dtype
    ran_in = getattr(vjp, "ran_in", None)
    return coarsest(run_dtype, ran_in) if ran_in is not None else AUTOCAST[autocast]


def functions(spec, opts: dict, inputs: dict):
    """-> (fn(**inputs), vjp(g, **inputs), ad_factory, inputs), or the Verdict that ends the check."""
    try:
        import torch
    except ImportError:
        return Verdict("error", MISSING)
    device = opts.get("device") or "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        return Verdict("skipped", f"device={device!r} was asked for, but torch finds no CUDA device here")
    lazy = _uninitialized(torch, spec.fn)
    if lazy:
        # its parameters are inputs of the check, and have no shape until a forward; gradcli does not
        # run one itself, since that would change the user's module as a side effect of checking it
        return Verdict("error", f"{display_name(spec.fn)} has parameters not initialized yet ({lazy}: a lazy "
                                "module): call it once on an input of the right shape before checking it")
    target = _Target(torch, spec, opts, inputs, device)
    if target.hand is not None:
        return target.fn, target.hand_vjp, target.ad_factory, target.inputs
    return with_batches(target), target.vjp_under_test(), target.ad_factory, target.inputs


class _Target:
    """One torch check's target, run the way a model runs it: every call under autograd with the inputs
    that are differentiated requiring grad (a forward that registers a tensor hook, or branches on
    ``requires_grad``, sees what it sees in training), torch's random generators reseeded first."""

    def __init__(self, torch, spec, opts: dict, inputs: dict, device: str):
        self.torch, self.spec, self.device = torch, spec, device
        target_fn = spec.fn
        self.run_dtype = getattr(torch, run_dtype_name(target_fn, opts))
        # a given tensor runs in its own dtype; every other float input in the run dtype
        own = {k: v.dtype for k, v in spec.inputs.items()
               if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())}
        self.seed, self.autocast, self.output = int(opts.get("seed", 0)), opts.get("autocast"), opts.get("output")
        self.wrt = opts.get("wrt")
        self.nondet_tol = float(opts.get("nondet_tol") or 0.0)
        self.bound = bind(_parameters(target_fn), list(spec.inputs), display_name(target_fn))
        self.cls = _function_class(target_fn)
        self.name = display_name(target_fn)
        self.hand = spec.vjp if spec.vjp is not None else spec.grad
        inputs = dict(inputs)
        self.module_names, self.modules = [], {}
        if _is_module(target_fn):
            params = _module_parameters(target_fn)
            self.module_names = [n for n, _ in params]
            for n, p in params:
                inputs[n] = p.detach().cpu().double().numpy()
            ref_module = copy.deepcopy(target_fn).to(device=device, dtype=torch.float64)
            self.test_module = copy.deepcopy(target_fn).to(device=device)
            if opts.get("dtype") is not None or self.autocast is not None:
                self.test_module = self.test_module.to(dtype=self.run_dtype)
            self.modules = {torch.float64: LoadedModule(torch, ref_module, self.module_names)}
        self.dtypes = {k: own.get(k, self.run_dtype) for k in inputs}
        self.complex = {k for k, v in inputs.items() if np.asarray(v).dtype.kind == "c"}
        # the point itself in the dtype under test, so that float64 reference and gradient see one point
        self.inputs = {k: rounded(torch, v, self.dtypes[k]) for k, v in inputs.items()}
        self.call_target = self.cls.apply if self.cls is not None else target_fn
        self.checked = False  # the backward is run twice, and its dtypes watched, once per check
        self.checked_twice = False  # likewise the double backward at order 2
        self.none: dict = {}  # input -> what was said of the None torch gave for its gradient

    def _run(self, tensors: dict, precision, of=None):
        torch, device = self.torch, self.device
        with torch.random.fork_rng(devices=[] if device == "cpu" else [device]):
            reseed(torch, self.seed, device)
            if self.module_names:
                module = self.modules.get(precision) or self.modules.setdefault(
                    precision, LoadedModule(torch, self.test_module, self.module_names))
                args = {k: v for k, v in tensors.items() if k not in self.module_names}
                return module(call_bound, self.bound, args, {k: tensors[k] for k in self.module_names})
            return call_bound(of or self.call_target, self.bound, tensors, keywords=self.cls is None)

    def wrt_of(self, kw: dict) -> list:
        return list(self.wrt or [k for k, v in kw.items() if np.asarray(v).dtype.kind in "fc"])

    def _tensors(self, kw: dict, wrt, exact: bool) -> dict:
        """The inputs as tensors in float64 (``exact``) or the dtype under test; those in ``wrt`` are leaves
        that require grad (a parameter's value is copied into the module's own, which is the leaf)."""
        torch = self.torch
        return {k: tensor_of(torch, v, torch.float64 if exact else self.dtypes.get(k, self.run_dtype), self.device,
                             k in wrt and k not in self.module_names) for k, v in kw.items()}

    def _forward(self, kw: dict, wrt, precision="test", of=None, select=True):
        """-> (output, tensors, leaf by wrt name) in the dtype under test (``precision`` "test") or in
        float64 (torch.float64); call under enable_grad."""
        torch = self.torch
        exact = precision is torch.float64
        tensors = self._tensors(kw, wrt, exact)
        # the target gets copies of the leaves, as it would inside a model: a forward that works in
        # place (ctx.mark_dirty) may not write to a leaf that requires grad
        given = {k: t.clone() if t.requires_grad else t for k, t in tensors.items()}
        if self.autocast is not None and not exact:
            with torch.autocast(device_type=self.device.split(":")[0], dtype=getattr(torch, AUTOCAST[self.autocast])):
                out = self._run(given, precision, of)
        else:
            out = self._run(given, precision, of)
        leaf = {k: self.modules[precision].parameter(k) if k in self.module_names else tensors[k] for k in wrt}
        return (selected(out, self.output) if select else out), tensors, leaf

    def fn(self, **kw):
        """The target in float64 -> numpy, run as the gradient under test runs (under autograd)."""
        if any(np.iscomplexobj(v) and k not in self.complex for k, v in kw.items()):
            raise TypeError("complex step does not apply to a torch check")
        with self.torch.enable_grad():
            out, _, _ = self._forward(kw, self.wrt_of(kw), self.torch.float64, select=False)
        return to_numpy(out)

    def _backward(self, out, seed_t, tensors, wrt, leaf, retain: bool, precision="test") -> dict:
        if self.module_names:
            return self.modules[precision].backward(out, seed_t, tensors, wrt, retain)
        grads = self.torch.autograd.grad(out, [leaf[k] for k in wrt], grad_outputs=seed_t, retain_graph=retain,
                                         allow_unused=True)
        return dict(zip(wrt, grads))

    def vjp_in(self, precision):
        """torch's backward run in the dtype under test ("test") or in float64 (torch.float64)."""
        def vjp(g, /, **kw):
            return self._vjp(precision, g, kw)
        return vjp

    def _vjp(self, precision, g, kw: dict) -> dict:
        torch = self.torch
        wrt = self.wrt_of(kw)
        with torch.enable_grad():
            out, tensors, leaf = self._forward(kw, wrt, precision)
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                return {k: np.zeros(np.shape(kw[k]), dtype=np.asarray(kw[k]).dtype) for k in wrt}
            seed_t = like(torch, g, out)
            # the first call that can show something (a zero cotangent gives zeros however often it runs)
            first = not self.checked and precision == "test" and bool(np.any(g))
            if first:
                self.checked = True
                if self.cls is not None and self.autocast is None:
                    self._check_dtypes(kw, wrt, g)
            grads = self._backward(out, seed_t, tensors, wrt, leaf, first, precision)
            if first:  # the same graph again, as gradcheck's reentrance check: state kept on ctx shows
                same_again(grads, lambda: self._backward(out, seed_t, tensors, wrt, leaf, False), self.nondet_tol)
        self._note_none([k for k in wrt if grads[k] is None])
        # torch reads None as a zero gradient: the comparison decides whether 0 is the derivative
        return {k: np.zeros(np.shape(kw[k]), dtype=np.asarray(kw[k]).dtype) if grads[k] is None
                else gradient_of(grads[k]) for k in wrt}

    def _note_none(self, names: list) -> None:
        for k in names:
            what = f"the gradient of {k} is None (.grad not set)" if self.module_names else \
                f"torch's backward gives None for {k}"
            self.none.setdefault(k, f"{what}: torch reads None as a zero gradient, so it is checked as 0")

    def _check_dtypes(self, kw, wrt, g):
        """A Finding where the Function's backward returns a gradient in another dtype than its input's."""
        torch = self.torch
        sub, returned = watched(torch, self.cls)
        args = []
        out, _, leaf = self._forward(kw, wrt, of=lambda *a: args.append(a) or sub.apply(*a))
        if isinstance(out, torch.Tensor) and out.requires_grad:
            torch.autograd.grad(out, [leaf[k] for k in wrt], grad_outputs=like(torch, g, out), allow_unused=True)
        order = list(kw) if self.bound is None else [p.name for p in self.bound]
        wrong = returned and args and dtype_mismatch(
            torch, args[0], returned[0], {id(a): k for a, k in zip(args[0], order) if k in wrt})
        if wrong:
            raise GradientDtype(wrong)

    def jvp(self, u: dict, /, **kw):
        """torch's forward mode through the Function's jvp, in the dtype under test: J u as numpy."""
        torch = self.torch
        tensors = self._tensors(kw, self.wrt_of(kw), exact=False)
        with torch.enable_grad():
            return function_jvp(torch, lambda t: selected(self._run(t, "test"), self.output), tensors, u)

    def vjp_under_test(self):
        """torch's backward as the pipeline calls it, with the framework's other derivatives attached."""
        vjp = self.vjp_in("test")
        if self.cls is not None and overrides(self.torch, self.cls, "jvp"):
            jvp = self.jvp
            vjp.framework_jvp = lambda u, /, **kw: jvp(u, **kw)
            vjp.framework_jvp.label, vjp.framework_jvp.method = "torch's jvp", "torch_jvp"
        vjp.framework_hvp = self.double_backward
        # order 2 differentiates the gradient in float64: a float32 gradient field is a staircase to the differences
        vjp.float64 = self.vjp_in(self.torch.float64)
        vjp.framework_none = self.none
        if self.autocast is not None:
            vjp.ran_in = self.ran_in()
        return vjp

    def ran_in(self) -> str:
        """The coarsest float dtype of what one forward under autocast made: its outputs and every tensor
        saved for the backward (an operation autocast lowered saves its lowered operands, so its rounding
        reaches the gradient), a Function's own saved tensors included."""
        seen = dtypes_made(self.torch, lambda: self._forward(self.inputs, self.wrt_of(self.inputs), select=False)[0])
        return coarsest(*[d for d in seen if d in EPS] or [str(self.run_dtype).replace("torch.", "")])

    def double_backward(self, v: dict, w, /, **kw):
        """What gradgradcheck differentiates: with G = grad(out, x, grad_outputs=w, create_graph=True),
        ({name: grad(G, x, grad_outputs=v)}, grad(G, w, grad_outputs=v)) | a skipped Verdict. At the first
        call the double backward runs twice on the same graph, as gradgradcheck's reentrance check does."""
        torch = self.torch
        wrt = self.wrt_of(kw)
        with torch.enable_grad():
            out, _, leaf = self._forward(kw, wrt)
            zeros = ({k: np.zeros(np.shape(kw[k])) for k in wrt}, np.zeros(np.shape(out)))
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                return zeros
            w_t = like(torch, w, out).requires_grad_(True)
            ends = [leaf[k] for k in wrt] + [w_t]
            twice = not self.checked_twice
            try:
                first = torch.autograd.grad(out, ends[:-1], grad_outputs=w_t, create_graph=True, allow_unused=True)
                # a gradient that autograd does not track is a constant: its derivatives are 0
                live = [(gk, like(torch, v[k], gk)) for k, gk in zip(wrt, first)
                        if gk is not None and gk.requires_grad]
                if not live:
                    return zeros

                def second_backward(retain: bool):
                    return torch.autograd.grad([a for a, _ in live], ends, grad_outputs=[b for _, b in live],
                                               retain_graph=retain, allow_unused=True)
                second = second_backward(twice)
                if any(s is None for s in second):
                    raise_if_once_differentiable(live)
            except Exception as exc:  # noqa: BLE001 - torch cannot differentiate this backward
                return Verdict("skipped", _not_twice(self.name, exc))
            if twice:
                self.checked_twice = True
                names = wrt + ["the cotangent"]
                same_again(dict(zip(names, second)), lambda: dict(zip(names, second_backward(False))),
                           self.nondet_tol, "torch's double backward")
        as_np = [np.zeros(tuple(t.shape)) if s is None else gradient_of(s) for t, s in zip(ends, second)]
        return dict(zip(wrt, as_np[:-1])), as_np[-1]

    def hand_vjp(self, g, **kw):
        """A hand-written vjp or gradient written with tensors, called with tensors -> numpy."""
        torch = self.torch
        tensors = {k: tensor_of(torch, v, self.dtypes.get(k, self.run_dtype), self.device, False)
                   for k, v in kw.items()}
        if self.spec.vjp is not None:
            gt = torch.as_tensor(np.asarray(g, dtype=np.float64), device=self.device).to(self.run_dtype)
            return to_numpy(self.hand(gt, **tensors), keep=True)
        return gradient_as_vjp(to_numpy(self.hand(**tensors), keep=True), g)

    def ad_factory(self, base, wrt):
        torch, cls, bound = self.torch, self.cls, self.bound
        if cls is not None:  # the forward without its backward
            return PrimalAD(torch, primal_of(cls, bound), base, list(wrt), self.output, self.seed,
                            "torch's AD of forward")
        if self.hand is not None and not self.module_names:  # torch's own gradient beside the hand-written one
            return PrimalAD(torch, lambda values: call_bound(self.spec.fn, bound, values), base, list(wrt),
                            self.output, self.seed, "torch's autograd")
        return self._rules_inside(base, wrt)

    def _rules_inside(self, base, wrt):
        """For a function or module whose graph runs a Function's backward: torch's autograd of the whole
        target with each such backward replaced by autograd of its forward, so that a rule wrong at one
        element of many is compared element by element (fast mode's identity alone sums them all);
        None where no Function is met (its own autograd is what is checked: no second opinion)."""
        torch = self.torch
        with torch.enable_grad():
            out, _, _ = self._forward(base, list(wrt), torch.float64, select=False)
        if self.module_names:
            module = self.modules[torch.float64].module
            names = self.module_names
            target = lambda values: call_bound(
                lambda *a, **k: torch.func.functional_call(module, {n: values[n] for n in names}, a, k),
                self.bound, {k: v for k, v in values.items() if k not in names})
        else:
            target = lambda values: call_bound(self.spec.fn, self.bound, values)
        return forward_rules_ad(torch, out, target, base, list(wrt), self.output, self.seed, _forward_takes_ctx)


def _not_twice(name: str, exc: Exception | None) -> str:
    """Why order 2 is skipped: torch cannot differentiate ``name``'s backward (``exc``: what it raised)."""
    why = ("its backward is marked @once_differentiable" if exc is None or "once_differentiable" in str(exc)
           else f"differentiating its backward raised {type(exc).__name__}: {first_line(exc)}")
    return (f"first order passed; order 2 is not checked: torch cannot differentiate the backward of {name} "
            f"({why}), so it has no second derivatives to check")
