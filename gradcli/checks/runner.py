"""Run one registered check: ``run_check(spec, defaults) -> CheckResult``.

The reference is independent of the gradient under test (DESIGN.md section 4):

* **traced AD** (``gradcli.trace``) is the reference when tracing succeeded, its value equals the
  function's, and it agrees with the finite differences wherever those can decide (every element in
  ``full`` mode, up to ``NUMERIC_CAP`` elements, else a seeded sample; seeded random directions in
  ``fast`` mode). AD has no truncation error, so it decides elements the differences cannot;
* otherwise the **finite differences** (:mod:`gradcli.checks.numeric`, Richardson with an error
  estimate), with **complex step** taking over only where it agrees with them.

An element passes when ``|got - ref| <= rtol * max(|ref|, typical) + atol + floor + 3 * estimate``
where ``typical`` is the median |ref| over that input (the gradient's own size, for elements that
cancel to near zero), ``floor`` is 10 ulp of the largest |ref| in the dtype under test and ``estimate``
the reference's own error estimate: a method is never blamed for error the reference announced. When
that estimate is too large for the tolerance, the element is **inconclusive** (not a pass), unless the
difference exceeds even the announced error, which is a failure. Default tolerances depend on the dtype
under test (``RTOL``); ``rtol``/``atol`` options replace them.

Scalar outputs (size 1) check the gradient; larger outputs check vector-Jacobian products: every
row of the Jacobian (``vjp(e_j)``) in ``full`` mode, and in ``fast`` mode ``K`` seeded random
cotangents v and directions u with <u, J^T v> = <J u, v> (J^T v from the gradient under test, J u by
differences) plus, where AD is trusted, J^T v compared element by element with AD's.
"""
from __future__ import annotations

import os
import time
import traceback as tb

import numpy as np

from ..errors import BadInput
from . import numeric as num
from .registry import materialize, validate_options
from .result import CheckResult, MethodSummary, Mismatch
from .spec import OPTIONS
from ..verdict.constants import CHECK_ESTIMATE_SAFETY

RTOL = {"float64": 1e-6, "float32": 2e-4}
ESTIMATE_SAFETY = CHECK_ESTIMATE_SAFETY  # check's own factor: see gradcli.verdict.constants
FLOOR_ULPS = 10.0
AUTO_FULL_MAX = 10_000  # auto mode: full while the Jacobian has at most this many entries
NUMERIC_CAP = 2000  # full mode with AD: finite differences on a sample above this many elements
SAMPLE = 200
DIRECTIONS = 4
MAX_MISMATCHES = 10
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Stop(Exception):
    """The check has its verdict (set on the result) before the comparison."""


def run_check(spec, defaults: dict | None = None) -> CheckResult:
    """Run ``spec`` with ``defaults`` (e.g. ``[tool.gradcli]``) under its own options -> CheckResult."""
    t0 = time.perf_counter()
    result = CheckResult(name=spec.name, file=spec.file, line=spec.line, kind=spec.kind, status="pass")
    try:
        opts = {k: v for k, v in (defaults or {}).items() if k in OPTIONS and v is not None}
        opts.update({k: v for k, v in spec.options.items() if v is not None})
        validate_options(opts)
        _Check(spec, opts, result).run()
    except _Stop:
        pass
    except BadInput as exc:
        result.status, result.message = "error", f"bad check: {exc.message}"
    result.seconds = time.perf_counter() - t0
    return result


def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without gradcli's own frames."""
    frames = [f for f in tb.extract_tb(exc.__traceback__)
              if not os.path.abspath(f.filename).startswith(_PACKAGE + os.sep)]
    return ("Traceback (most recent call last):\n" + "".join(tb.format_list(frames))
            + "".join(tb.format_exception_only(type(exc), exc)))


#: The coarsest Taylor-test resolution (relative error in <g, v> that would still show) at which an
#: inconclusive check may be called a pass: coarser than this, a 1e-3 bug could hide.
TAYLOR_RESOLUTION = 1e-3


class _Check:
    def __init__(self, spec, opts, result: CheckResult):
        self.spec, self.opts, self.r = spec, opts, result
        self.dtype = np.dtype(opts.get("dtype", "float64")).name
        self.rtol = opts.get("rtol", RTOL[self.dtype])
        self.atol = opts.get("atol", 0.0)
        self.H = opts.get("eps", num.H_DEFAULT)
        self.seed = int(opts.get("seed", 0))
        self.with_grad = bool(opts.get("with_grad", False))
        self.output = opts.get("output")

    # --- outcome helpers -------------------------------------------------------------------------
    def stop(self, status, message, exc=None):
        self.r.status, self.r.message = status, message
        if exc is not None:
            self.r.traceback = user_traceback(exc)
        raise _Stop

    # --- setup -----------------------------------------------------------------------------------
    def run(self):
        spec, r = self.spec, self.r
        # a registered hvp is checked unless order=1 says otherwise
        self.order = int(self.opts.get("order", 2 if spec.hvp is not None else 1))
        r.order = self.order
        if spec.hvp is not None and self.order == 1:
            r.notes.append("order=1: the registered hvp is not checked")
        if self.opts.get("with_grad"):
            r.kind = "grad"
        if spec.expression is not None:
            from .expression import expression_functions
            self.fn, self.user_vjp, self.ad_factory = expression_functions(spec)
            inputs = materialize(spec.inputs, self.seed, self.opts.get("domain"), np.dtype(self.dtype))
            inputs = {k: v.astype(self.dtype) if v.dtype.kind in "biu" else v for k, v in inputs.items()}
        else:
            self.fn, self.user_vjp, self.ad_factory = spec.fn, None, None
            if isinstance(spec.fn, np.ufunc):  # np.tanh takes no keywords: inputs go in the order given
                ufunc = spec.fn
                self.fn = lambda **kw: ufunc(*kw.values())
            inputs = materialize(spec.inputs, self.seed, self.opts.get("domain"), np.dtype(self.dtype))
        self.autodiff = (spec.grad is None and spec.vjp is None and self.user_vjp is None
                         and not self.with_grad)
        wrt = self.opts.get("wrt")
        if wrt is None:
            wrt = [k for k, v in inputs.items() if v.dtype.kind == "f"]
        for k in wrt:
            if inputs[k].dtype.kind != "f":
                inputs[k] = inputs[k].astype(self.dtype)
        if not wrt:
            self.stop("skipped", "no floating-point inputs to differentiate (integer and boolean inputs are "
                                 "constants; pass floats such as x=1.0, or name them in wrt=)")
        self.inputs, self.wrt = inputs, list(wrt)
        self.shapes = {k: inputs[k].shape for k in self.wrt}
        self.sizes = [int(np.prod(self.shapes[k], dtype=np.int64)) for k in self.wrt]
        self.n = sum(self.sizes)

        value, user_grads = self.call_under_test()
        self.out_shape = value.shape
        self.m = value.size
        if self.m == 0:
            self.stop("skipped", "the output is empty: nothing to differentiate")
        bad = ~np.isfinite(value)
        if bad.any():
            at = np.unravel_index(int(np.argmax(bad.ravel())), value.shape)
            self.stop("undefined", f"the function is not finite at the inputs ({value[at]} at output "
                                   f"{_idx(at)}): the gradient is undefined there")
        # the reference works in float64 whatever the dtype under test
        self.base = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inputs.items()}
        try:
            self.f0 = np.asarray(self.call(self.base), dtype=np.float64).ravel()
            again = np.asarray(self.call(self.base), dtype=np.float64).ravel()
        except Exception as exc:  # noqa: BLE001
            self.stop("error", f"the function raised in float64: {type(exc).__name__}: {exc}", exc)
        if again.shape != self.f0.shape or not np.array_equal(again, self.f0, equal_nan=True):
            # finite differences of a function that moves between calls measure its randomness
            diff = float(np.max(np.abs(again - self.f0))) if again.shape == self.f0.shape else float("nan")
            self.stop("inconclusive", f"the function returns different values for the same inputs (they differ "
                                      f"by {diff:.3g}): seed its randomness (e.g. a fixed dropout mask) so that "
                                      "its gradient can be checked")
        self.scalar = self.m == 1
        mode = self.opts.get("mode", "auto")
        if mode == "auto":
            mode = "full" if self.m * self.n <= AUTO_FULL_MAX else "fast"
        r.mode = mode
        self.numf = num.Function(self.call, self.base, self.wrt)
        self.ad = self.make_ad()
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

        from .compare import compare_full, compare_fast
        self.user_grads = user_grads
        if mode == "full":
            compare_full(self)
        else:
            compare_fast(self)
        self.after_first_order()

    def after_first_order(self):
        """The Taylor test (asked for, or to resolve an inconclusive verdict), then order 2 on a pass."""
        from .taylor import taylor_test

        r = self.r
        if self.opts.get("taylor") or r.status == "inconclusive":
            t = taylor_test(self, 1)
            r.taylor = t
            fine = t.resolution is None or t.resolution <= TAYLOR_RESOLUTION
            if r.status == "inconclusive" and t.verdict == "right" and fine:
                r.status = "pass"
                r.message += f"; resolved by the Taylor test: the remainder falls like h^2 ({t.detail})"
            elif r.status == "inconclusive" and t.verdict == "right":
                # slope 2 only bounds the error by the resolution: too coarse to call it verified
                r.message += (f"; the Taylor test agrees but only to {t.resolution:.2g} relative ({t.detail}); "
                              "evaluate the function in float64 to decide")
            elif r.status == "inconclusive" and t.verdict == "wrong":
                r.status = "fail"
                r.message += (f"; the Taylor test decides: the remainder falls like h, not h^2 ({t.detail}): "
                              "the gradient is wrong")
            elif r.status == "pass" and t.verdict == "wrong":
                r.notes.append(f"the Taylor test disagrees: {t.detail}")
        if self.order == 2 and r.status == "pass":
            from .second_order import check_second_order
            check_second_order(self)

    def call(self, inputs: dict, complex_ok: bool = False):
        """The differentiated output of the function at ``inputs`` (fresh copies: f may write to them)."""
        out = self.fn(**{k: np.array(v) for k, v in inputs.items()})
        return self.select(out)

    def select(self, out):
        if self.with_grad:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError("with_grad=True: the function must return (value, gradients)")
            return out[0]
        if isinstance(out, tuple):
            return out[0 if self.output is None else self.output]
        return out

    def call_under_test(self):
        """f at the inputs in the dtype under test -> (output array, gradients from with_grad or None)."""
        try:
            with np.errstate(all="ignore"):  # nan and inf are findings here, reported as statuses
                out = self.fn(**{k: np.array(v) for k, v in self.inputs.items()})
        except Exception as exc:  # noqa: BLE001 - the function under test raised: status error
            self.stop("error", f"the function raised {type(exc).__name__}: {exc}", exc)
        grads = None
        if self.with_grad:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                self.stop("error", "with_grad=True, but the function does not return a pair (value, gradients)")
            out, grads = out
        elif isinstance(out, tuple):
            k = 0 if self.output is None else self.output
            if not -len(out) <= k < len(out):
                self.stop("error", f"output={k}, but the function returns {len(out)} values")
            out = out[k]
        elif self.output not in (None, 0):
            self.stop("error", f"output={self.output}, but the function returns a single value, not a tuple")
        try:
            value = np.asarray(out)
            if value.dtype.kind not in "fiub":
                raise TypeError(f"dtype {value.dtype}")
        except Exception as exc:  # noqa: BLE001
            self.stop("error", f"the output is not a real number or array ({exc})")
        return value.astype(np.float64), grads

    # --- the gradient under test -----------------------------------------------------------------
    def user_gradient(self, what: str, grads=None):
        """Gradients from ``grads`` (with_grad) or from calling the hand-written grad -> {name: array}."""
        if grads is None:
            try:
                grads = self.spec.grad(**{k: np.array(v) for k, v in self.inputs.items()})
            except Exception as exc:  # noqa: BLE001 - the gradient under test raised: that is a failure
                self.stop("fail", f"the gradient function raised {type(exc).__name__}: {exc}", exc)
        return self.normalize(grads, what)

    def user_vjp_at(self, g: np.ndarray):
        vjp = self.user_vjp or self.spec.vjp
        g = np.array(g.reshape(self.out_shape), dtype=self.dtype)
        try:
            res = vjp(g, **{k: np.array(v) for k, v in self.inputs.items()})
        except Exception as exc:  # noqa: BLE001
            self.stop("fail", f"the vjp function raised {type(exc).__name__}: {exc}", exc)
        return self.normalize(res, "the vjp")

    def normalize(self, res, what: str) -> dict:
        """One array per wrt input, each of exactly that input's shape, or a fail with a clear message."""
        wrt = self.wrt
        names = ", ".join(wrt)
        if isinstance(res, dict):
            unknown = [k for k in res if k not in self.inputs]
            if unknown:
                self.stop("fail", f"{what} returned a gradient for {unknown[0]!r}, which is not an input")
            missing = [k for k in wrt if k not in res]
            if missing:
                self.stop("fail", f"{what} returned no gradient for {missing[0]!r} (expected one for each of: "
                                  f"{names})")
            items = [res[k] for k in wrt]
        elif isinstance(res, (tuple, list)) and not (len(wrt) == 1 and _is_array_like_list(res, self.shapes[wrt[0]])):
            if len(res) != len(wrt):
                hint = " (use wrt=[...] to check only some inputs)" if len(res) < len(wrt) else ""
                self.stop("fail", f"{what} returned {len(res)} gradient{'s' if len(res) != 1 else ''} for "
                                  f"{len(wrt)} input{'s' if len(wrt) != 1 else ''} ({names}){hint}")
            items = list(res)
        elif len(wrt) == 1:
            items = [res]
        else:
            self.stop("fail", f"{what} returned a single {type(res).__name__} for {len(wrt)} inputs ({names}): "
                              "return one per input (a tuple in parameter order, or a dict by name)")
        out = {}
        for k, g in zip(wrt, items):
            try:
                a = np.asarray(g, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                self.stop("fail", f"{what}: the gradient for {k!r} is not a numeric array ({exc})")
            if a.shape != self.shapes[k]:
                self.stop("fail", f"{what}: the gradient for {k!r} has shape {a.shape}, but {k} has shape "
                                  f"{self.shapes[k]}")
            out[k] = a
        return out

    def under_test_vjp(self, w: np.ndarray) -> np.ndarray:
        """The gradient under test of <w, f> at the inputs, flat over the wrt inputs (w: flat, size m)."""
        has_vjp = self.user_vjp is not None or self.spec.vjp is not None
        if self.autodiff:
            if self.scalar:
                return self.flat(self.ad.gradient()) * float(w[0])
            return self.flat(self.ad.vjp(w.reshape(self.out_shape)))
        if self.scalar and not has_vjp:
            return self.flat(self.user_gradient("the gradient function", self.user_grads)) * float(w[0])
        return self.flat(self.user_vjp_at(w))

    # --- AD --------------------------------------------------------------------------------------
    def make_ad(self):
        notes = self.r.notes
        if self.ad_factory is not None:
            return self.ad_factory(self.base, self.wrt)
        try:
            from ..trace import trace
        except ImportError:
            notes.append("traced AD unavailable (gradcli.trace cannot be imported); finite differences used")
            return None
        output = 0 if self.with_grad else self.output
        try:
            t = trace(self.fn, {k: np.array(v) for k, v in self.base.items()}, list(self.wrt), output)
        except Exception as exc:  # noqa: BLE001 - a tracer failure is a note, never the user's fault
            notes.append(f"tracing failed ({type(exc).__name__}: {exc}); finite differences used")
            return None
        problems = list(getattr(t, "problems", []) or [])
        if not getattr(t, "ok", False):
            notes.extend(problems or ["tracing failed"])
            notes.append("traced AD not used; finite differences used")
            return None
        notes.extend(problems)
        notes.extend(getattr(t, "notes", []) or [])
        try:
            tv = np.asarray(t.value, dtype=np.float64).ravel()
        except Exception:  # noqa: BLE001
            tv = None
        size = max(float(np.max(np.abs(self.f0))), np.finfo(np.float64).tiny)
        if tv is None or tv.shape != self.f0.shape or not np.all(np.abs(tv - self.f0) <= 1e-9 * size):
            notes.append("the traced value differs from the function's value (something cut the trace, e.g. "
                         "np.asarray or float()); traced AD not used, finite differences used")
            return None
        return t

    # --- shared bookkeeping ----------------------------------------------------------------------
    def flat(self, d: dict) -> np.ndarray:
        return np.concatenate([np.asarray(d[k], dtype=np.float64).ravel() for k in self.wrt])

    def input_of(self, cols) -> np.ndarray:
        """The wrt position of each flat column index."""
        return np.searchsorted(self.offsets[1:], np.asarray(cols), side="right")

    def label(self, c: int) -> tuple:
        """Flat column index -> (input name, flat index inside that input)."""
        k = int(self.input_of(c))
        return self.wrt[k], int(c - self.offsets[k])

    def unflat_index(self, c: int):
        name, i = self.label(c)
        return name, tuple(int(v) for v in np.unravel_index(i, self.shapes[name])) if self.shapes[name] else ()

    def out_index(self, j: int):
        return tuple(int(v) for v in np.unravel_index(j, self.out_shape)) if self.out_shape else ()

    def floor(self, ref: np.ndarray) -> float:
        big = np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0)
        return FLOOR_ULPS * np.finfo(self.dtype).eps * big


def _is_array_like_list(res, shape) -> bool:
    # a single input's gradient given as a plain list of numbers, rather than a list of one gradient
    if len(res) == 1 and np.shape(res[0]) == shape:
        return False
    return np.shape(res) == shape


def _idx(at) -> str:
    return "[" + ", ".join(str(int(i)) for i in at) + "]"


def summarize(name, status, abs_err=None, rel_err=None, message="") -> MethodSummary:
    def mx(a):
        if a is None:
            return None
        a = np.asarray(a, dtype=np.float64)
        a = a[~np.isnan(a)]  # an inf (got 1 where 0 was expected) is the largest error, not dropped
        return float(a.max()) if a.size else None
    return MethodSummary(name, status, mx(abs_err), mx(rel_err), message)


def mismatch(check: _Check, c: int, expected, got, j: int | None = None) -> Mismatch:
    name, index = check.unflat_index(c)
    abs_err = abs(float(got) - float(expected))
    rel = abs_err / abs(float(expected)) if expected != 0 else (0.0 if abs_err == 0 else float("inf"))
    return Mismatch(name, tuple(int(i) for i in index), float(expected), float(got), abs_err, rel,
                    None if j is None or check.scalar else check.out_index(j))
