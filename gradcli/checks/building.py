"""Building a check's context: its function called at the inputs and everything resolved once into the
frozen :class:`~gradcli.checks.context.CheckContext` (the inputs and ``wrt``, the dtype, the mode, the value in
float64, traced AD or the framework's AD as a reference) that the comparisons share; gradcli.checks.runner
runs the comparisons over it."""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gradcli import trace as tracing
from gradcli.core.errors import BadInput
from gradcli.checks.comparisons import numeric as num
from gradcli.checks.targets.complex_inputs import as_pairs, real_outputs
from gradcli.checks.collect import display_path
from gradcli.checks.context import AUTO_FULL_MAX, RTOL, CheckContext, Verdict, call_selected, index_text
from gradcli.checks.targets.expression import expression_functions
from gradcli.checks.process.interrupt import raised_by_user_code
from gradcli.checks.registry import DTYPES, materialize
from gradcli.checks.result import CheckResult
from gradcli.checks.targets import framework as frameworks
from gradcli.checks.comparisons.under_test import SteadyOutput, user_traceback


@dataclass(frozen=True)
class _Asked:
    """The options the steps of :func:`build_context` share; ``dtype`` as asked (a framework check's
    tolerance may allow for a coarser one)."""

    dtype: str
    seed: int
    order: int
    with_grad: bool
    output: Any


@dataclass(frozen=True)
class _UnderTest:
    """What a check calls, whatever its kind: the spec (a numpy check's rewritten for complex inputs and
    outputs), the function, the gradient under test and the AD beside it, the inputs, and the dtype whose
    rounding the tolerance allows for."""

    spec: Any
    fn: Callable
    user_vjp: Callable | None
    ad_factory: Callable | None
    inputs: dict
    dtype: str
    framework_hvp: Callable | None = None


def build_context(spec, opts: dict, result: CheckResult):
    """The spec's arrays, options and tolerances, the function called at the inputs, the references
    prepared -> CheckContext, or the Verdict that ends the check before any comparison. Notes, the
    order, the kind and the mode go on ``result`` as they are found."""
    asked = _asked(spec, opts, result)
    made = _under_test(spec, opts, asked, result)
    if isinstance(made, Verdict):
        return made
    wrt = _wrt(made.inputs, opts, made.dtype)
    if isinstance(wrt, Verdict):
        return wrt
    called = _called(made, asked, wrt, opts.get("mode", "auto"))
    if isinstance(called, Verdict):
        return called
    value, user_grads, mode = called
    # the reference works in float64 whatever the dtype under test
    base = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in made.inputs.items()}
    steady = _float64_value(made.fn, base, asked)
    if isinstance(steady, Verdict):
        return steady
    raw0, f0 = steady
    result.mode = mode
    numf = num.Function(SteadyOutput(made.fn, asked.with_grad, asked.output, base, raw0), base, list(wrt))
    ad, constant = _reference_ad(made, asked, base, wrt, f0, result)
    spec, dtype, inputs = made.spec, made.dtype, made.inputs
    sizes = _sizes(inputs, wrt)
    autodiff = spec.grad is None and spec.vjp is None and made.user_vjp is None and not asked.with_grad
    return CheckContext(
        spec=spec, kind=result.kind, dtype=dtype, rtol=opts.get("rtol", RTOL[dtype]), atol=opts.get("atol", 0.0),
        step=opts.get("eps", num.H_DEFAULT), seed=asked.seed, order=asked.order, mode=mode,
        taylor=bool(opts.get("taylor")), with_grad=asked.with_grad, output=asked.output, fn=made.fn,
        user_vjp=made.user_vjp, ad_factory=made.ad_factory, autodiff=autodiff,
        inputs=inputs, base=base, wrt=wrt, shapes={k: inputs[k].shape for k in wrt},
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), out_shape=value.shape, f0=f0,
        user_grads=user_grads, numf=numf, ad=ad, setup_notes=tuple(result.notes), constant=constant,
        framework_hvp=made.framework_hvp)


def _asked(spec, opts: dict, result: CheckResult) -> _Asked:
    """The options the steps share; the order, its note and a with_grad check's kind go on ``result``."""
    dtype = opts.get("dtype") or "float64"
    seed = int(opts.get("seed", 0))
    with_grad, output = bool(opts.get("with_grad", False)), opts.get("output")
    # a registered hvp is checked unless order=1 says otherwise
    order = int(opts.get("order", 2 if spec.hvp is not None else 1))
    result.order = order
    if spec.hvp is not None and order == 1:
        result.notes.append("order=1: the registered hvp is not checked")
    if opts.get("with_grad"):
        result.kind = "grad"
    return _Asked(dtype=dtype, seed=seed, order=order, with_grad=with_grad, output=output)


def _under_test(spec, opts: dict, asked: _Asked, result: CheckResult):
    """The check's functions and inputs by its kind (expression, framework, numpy) -> _UnderTest | Verdict."""
    if spec.expression is not None:
        return _expression_under_test(spec, opts, asked)
    if opts.get("framework") in frameworks.TARGETS:
        return _framework_under_test(spec, opts, asked, result)
    return _numpy_under_test(spec, opts, asked, result)


def _expression_under_test(spec, opts: dict, asked: _Asked):
    """An expression check's functions at inputs drawn in the dtype under test -> _UnderTest | Verdict."""
    fn, user_vjp, ad_factory = expression_functions(spec)
    inputs = materialize(spec.inputs, asked.seed, opts.get("domain"), np.dtype(asked.dtype))
    inputs = {k: v.astype(asked.dtype) if v.dtype.kind in "biu" else v for k, v in inputs.items()}
    if any(v.dtype.kind == "c" for v in inputs.values()):
        return Verdict("skipped", "complex inputs to an expression check are not differentiated")
    return _UnderTest(spec, fn, user_vjp, ad_factory, inputs, asked.dtype)


def _framework_under_test(spec, opts: dict, asked: _Asked, result: CheckResult):
    """A torch or jax check's functions -> _UnderTest | the Verdict the framework target ends it with."""
    target = frameworks.target_of(opts["framework"])
    inputs = materialize(target.as_arrays(spec.inputs), asked.seed, opts.get("domain"), np.float64)
    built = frameworks.functions(spec, opts, inputs)
    if isinstance(built, Verdict):
        return built
    # the framework's own gradient is the vjp under test; no trace of framework code
    fn, user_vjp, ad_factory, inputs = built
    framework_hvp = getattr(user_vjp, "framework_hvp", None)
    # the tolerance allows for the coarsest rounding in play: given tensors keep their own dtype
    dtype = target.tolerance_dtype(opts, target.run_dtype_name(spec.fn, opts, spec.inputs), user_vjp)
    result.kind = spec.kind
    return _UnderTest(spec, fn, user_vjp, ad_factory, inputs, dtype, framework_hvp)


def _numpy_under_test(spec, opts: dict, asked: _Asked, result: CheckResult):
    """A numpy check's function at inputs in the dtype under test, complex inputs as real and imaginary
    parts (order 1 only) and outputs made real -> _UnderTest | Verdict."""
    dtype = asked.dtype
    if dtype not in DTYPES:
        raise BadInput(f"dtype must be float64 or float32 for a numpy check, got {dtype!r}")
    inputs = materialize(spec.inputs, asked.seed, opts.get("domain"), np.dtype(dtype))
    wrt = opts.get("wrt")
    complex_inputs = [k for k, v in inputs.items() if v.dtype.kind == "c" and (wrt is None or k in wrt)]
    if complex_inputs:
        if asked.order == 2:
            return Verdict("skipped", "order=2 is not checked for complex inputs ("
                                      f"{', '.join(complex_inputs)}); order=1 is")
        names = list(wrt) if wrt is not None else [k for k, v in inputs.items() if v.dtype.kind in "fc"]
        spec, inputs, note = as_pairs(spec, inputs, complex_inputs, names)
        result.notes.append(note)
    spec = real_outputs(spec)  # also calls a ufunc target (np.tanh) with its inputs in order
    return _UnderTest(spec, spec.fn, None, None, inputs, dtype)


def _wrt(inputs: dict, opts: dict, dtype: str):
    """The inputs differentiated (``wrt=``, else every float input) -> tuple | the Verdict where none has an
    element to check. One named in ``wrt=`` that is not a float becomes one in ``inputs``."""
    wrt = opts.get("wrt")
    if wrt is None:
        wrt = [k for k, v in inputs.items() if v.dtype.kind == "f"]
    for k in wrt:
        if inputs[k].dtype.kind != "f":
            inputs[k] = inputs[k].astype(np.float64 if opts.get("framework") in frameworks.TARGETS else dtype)
    if not wrt:
        return Verdict("skipped", "no floating-point inputs to differentiate (integer and boolean inputs are "
                                  "constants; pass floats such as x=1.0, or name them in wrt=)")
    wrt = tuple(wrt)
    if not sum(_sizes(inputs, wrt)):
        # any gradient of an empty input is right: a pass would say something was checked
        return Verdict("skipped", "every input to differentiate is empty (" + ", ".join(
            f"{k}: shape {inputs[k].shape}" for k in wrt) + "): nothing to check")
    return wrt


def _sizes(inputs: dict, wrt: tuple) -> list:
    """The number of elements of each input differentiated."""
    return [int(np.prod(inputs[k].shape, dtype=np.int64)) for k in wrt]


def _called(made: _UnderTest, asked: _Asked, wrt: tuple, mode: str):
    """f at the inputs in the dtype under test -> (output, gradients from with_grad or None, the mode: "auto"
    is full where the Jacobian is small) | the Verdict where the output is empty or not finite."""
    called = _call_under_test(made.fn, made.inputs, asked.with_grad, asked.output)
    if isinstance(called, Verdict):
        return called
    value, user_grads = called
    if value.size == 0:
        return Verdict("skipped", "the output is empty: nothing to differentiate")
    if mode == "auto":
        mode = "full" if value.size * sum(_sizes(made.inputs, wrt)) <= AUTO_FULL_MAX else "fast"
    bad = ~np.isfinite(value)
    # a nan or inf in some outputs (a nan in a given input) leaves the others to judge: the comparison
    # reports the entries with no derivative as undefined, and a wrong rule at the rest as a failure. Fast
    # mode's random directions and cotangents leave out the inputs given as nan or inf and the outputs
    # that are not finite; an output not finite at finite inputs it cannot trace back to an input
    given_finite = all(np.isfinite(made.inputs[k]).all() for k in wrt)
    if bad.all() or (bad.any() and mode == "fast" and given_finite):
        at = np.unravel_index(int(np.argmax(bad.ravel())), value.shape)
        return Verdict("undefined", f"the function is not finite at the inputs ({value[at]} at output "
                                    f"{index_text(at)}): the gradient is undefined there"
                       + ("" if bad.all() else "; mode='full' judges the other elements"))
    return value, user_grads, mode


def _float64_value(fn, base: dict, asked: _Asked):
    """f at the inputs in float64, called twice -> (its output as returned, the selected output flat) | the
    Verdict where it raises or returns different values."""
    try:
        raw0 = call_selected(fn, base, asked.with_grad, asked.output)
        f0 = np.asarray(raw0, dtype=np.float64).ravel()
        again = np.asarray(call_selected(fn, base, asked.with_grad, asked.output), dtype=np.float64).ravel()
    except Exception as exc:  # noqa: BLE001
        return Verdict("error", f"the function raised in float64: {raised_by_user_code(exc)}", user_traceback(exc))
    if again.shape != f0.shape or not np.array_equal(again, f0, equal_nan=True):
        # finite differences of a function that moves between calls measure its randomness
        diff = float(np.max(np.abs(again - f0))) if again.shape == f0.shape else float("nan")
        return Verdict("inconclusive", f"the function returns different values for the same inputs (they differ "
                                       f"by {diff:.3g}): seed its randomness (e.g. a fixed dropout mask) so that "
                                       "its gradient can be checked")
    return raw0, f0


def _reference_ad(made: _UnderTest, asked: _Asked, base: dict, wrt: tuple, f0, result: CheckResult):
    """The AD a reference may use -> (ad or None, constant): a framework's AD of the primal where the target
    offers one (a note where it cannot be had), else gradcli's traced AD."""
    if made.ad_factory is None:
        return _traced_ad(made.fn, base, wrt, 0 if asked.with_grad else asked.output, f0, result.notes,
                          _source_files(made.spec))
    try:
        return made.ad_factory(base, list(wrt)), False
    except Exception as exc:  # noqa: BLE001 - a framework's AD of the primal is a second opinion only
        result.notes.append(f"the framework's AD of the primal cannot be had ({exc}): finite differences "
                            "decide")
        return None, False


def _call_under_test(fn, inputs: dict, with_grad: bool, output):
    """f at the inputs in the dtype under test -> (output array, gradients from with_grad or None) | Verdict."""
    try:
        with np.errstate(all="ignore"):  # nan and inf are findings here, reported as statuses
            out = fn(**{k: np.array(v) for k, v in inputs.items()})
    except Exception as exc:  # noqa: BLE001 - the function under test raised: status error
        return Verdict("error", f"the function raised {raised_by_user_code(exc)}", user_traceback(exc))
    grads = None
    if with_grad:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            return Verdict("error", "with_grad=True, but the function does not return a pair (value, gradients)")
        out, grads = out
    elif isinstance(out, (tuple, list)):
        # a list of arrays (np.split's result) is several outputs, as a tuple is, not one stacked array
        k = 0 if output is None else output
        if not -len(out) <= k < len(out):
            return Verdict("error", f"output={k}, but the function returns {len(out)} values")
        out = out[k]
    elif output not in (None, 0):
        return Verdict("error", f"output={output}, but the function returns a single value, not a tuple or list")
    try:
        value = np.asarray(out)
        if value.dtype.kind not in "fiub":
            raise TypeError(f"dtype {value.dtype}")
    except Exception as exc:  # noqa: BLE001
        return Verdict("error", f"the output is not a real number or array ({exc})")
    return value.astype(np.float64), grads


def _traced_ad(fn, base: dict, wrt, output, f0: np.ndarray, notes: list, files=()):
    """gradcli's traced AD of ``fn`` at ``base`` -> (Trace, constant), or (None, False) with the reason in
    ``notes`` where not usable. ``constant``: the output reaches the inputs only through constant routes
    (floor, sign, comparisons), so the trace proves its derivative 0. ``files``: the model's source
    files, named in notes by their path from the working directory."""
    try:
        t = tracing.trace(fn, {k: np.array(v) for k, v in base.items()}, list(wrt), output)
    except Exception as exc:  # noqa: BLE001 - a tracer failure is a note, never the user's fault
        notes.append(f"tracing failed ({raised_by_user_code(exc)}); finite differences used")
        return None, False
    details = list(getattr(t, "problem_details", None) or [])
    # each problem names its own file; the lines about problems after the output, the model's files
    own = {str(p): _with_paths(str(p), [getattr(p, "file", "")]) for p in details}
    problems = [own.get(p) or _with_paths(p, files) for p in getattr(t, "problems", []) or []]
    # an untraced output with nothing cut or refused on the way: no differentiable route reached it
    constant = not getattr(t, "ok", False) and hasattr(t, "problem_details") and not details
    if not getattr(t, "ok", False) and not constant:
        notes.extend(problems or ["tracing failed"])
        notes.append("traced AD not used; finite differences used")
        return None, False
    if not constant:
        notes.extend(problems)
    notes.extend(_with_paths(n, files) for n in getattr(t, "notes", []) or [])
    try:
        tv = np.asarray(t.value, dtype=np.float64).ravel()
    except Exception:  # noqa: BLE001
        tv = None
    finite = np.isfinite(f0)  # a nan in a given input: the trace is compared where f is finite
    size = max(float(np.max(np.abs(f0[finite]), initial=0.0)), np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore"):
        same = tv is not None and tv.shape == f0.shape and bool(
            np.all(np.where(finite, np.abs(tv - f0) <= 1e-9 * size, np.isnan(tv) == np.isnan(f0))))
    if not same:
        notes.append("the traced value differs from the function's value (something cut the trace, e.g. "
                     "np.asarray or float()); traced AD not used, finite differences used")
        return None, False
    return t, constant


def _with_paths(text: str, files) -> str:
    """``text`` with ``(layers.py:12)`` written as the path from the working directory
    (``(models/a/layers.py:12)``) for each of ``files``: several model files may share a name."""
    for f in files:
        shown = display_path(f) if f else f
        if shown != os.path.basename(f):
            text = text.replace(f"({os.path.basename(f)}:", f"({shown}:")
    return text


def _source_files(spec) -> set:
    """The files the functions under test were defined in."""
    out = set()
    for f in (spec.fn, spec.grad, spec.vjp, spec.hvp):
        try:
            code = getattr(inspect.unwrap(f), "__code__", None) if callable(f) else None
        except ValueError:  # a __wrapped__ cycle
            code = None
        if code is not None:
            out.add(code.co_filename)
    return out
