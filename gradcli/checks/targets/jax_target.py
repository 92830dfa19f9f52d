"""JAX targets checked as numpy-level checks: a ``jax.custom_vjp`` or ``jax.custom_jvp`` function, or a
function of jax arrays (``framework="jax"``).

``fn`` runs the target in float64 (the reference the numerics differentiate); the vjp under test is
``jax.vjp`` of the target in the dtype under test, so every custom rule inside it is what is checked
(for a ``custom_jvp``, JAX's transpose of the jvp rule). JAX runs with x64 enabled once a jax check
runs, so that float64 is float64; gradcli does not trace jax code.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.checks.targets.binding import bind, call_bound, selected, signature_parameters
from gradcli.checks.comparisons.under_test import gradient_as_vjp, user_traceback
from gradcli.checks.process.interrupt import raised_by_user_code
from gradcli.checks.context import EPS, Verdict, coarsest

KIND = "jax.custom_vjp or jax.custom_jvp function"
#: complex inputs are checked, as real and imaginary parts in PyTorch's convention (see _conjugated)
COMPLEX = True
MISSING = "jax is not installed; this check needs it: pip install 'gradcli[jax]'"


def _jax():
    return sys.modules.get("jax")  # a custom rule exists only once jax is imported


def _custom(fn) -> bool:
    jax = _jax()
    if jax is None:
        return False
    kinds = tuple(k for k in (getattr(jax, "custom_vjp", None), getattr(jax, "custom_jvp", None))
                  if isinstance(k, type))
    return bool(kinds) and isinstance(fn, kinds)


def _unwrapped(fn):
    """The function under ``jax.jit`` (or functools.wraps) wrappers: a jitted custom rule is still one."""
    for _ in range(8):
        if _custom(fn):  # a custom rule wraps its own primal: stop at the rule
            break
        inner = getattr(fn, "__wrapped__", None)
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


def detects(fn) -> bool:
    return _custom(fn) or _custom(_unwrapped(fn))


def display_name(fn) -> str:
    inner = getattr(fn, "fun", fn) if _custom(fn) else fn
    return getattr(inner, "__name__", type(fn).__name__)


def _parameters(fn):
    return signature_parameters(fn.fun if _custom(fn) else fn)


def validate(fn, inputs: dict, options: dict) -> None:
    """Raise BadInput for what a jax check cannot take."""
    if not callable(fn):
        raise BadInput(f"framework='jax' takes a function of jax arrays, got {type(fn).__name__}")
    bind(_parameters(fn), list(inputs), display_name(fn))


def _is_jax_array(v) -> bool:
    jax = _jax()
    return jax is not None and isinstance(v, jax.Array)


def _is_float(jnp, dtype) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))


def as_arrays(inputs: dict) -> dict:
    """Given jax arrays as numpy (floats, bfloat16 included, as float64); shapes and other values untouched."""
    out = {}
    for k, v in inputs.items():
        if _is_jax_array(v):
            import jax.numpy as jnp
            a = np.asarray(v)
            v = a.astype(np.float64) if _is_float(jnp, v.dtype) else a.astype(np.complex128) if a.dtype.kind == "c" \
                else a
        out[k] = v
    return out


def run_dtype_name(fn, options: dict, inputs: dict | None = None) -> str:
    """The dtype the gradient under test is computed in: ``dtype=``, else float64; given ``inputs``
    (the spec's own), the coarsest of that and the given jax arrays' float dtypes, which they keep."""
    names = [options.get("dtype") or "float64"]
    names += [_REAL_OF.get(str(v.dtype), str(v.dtype)) for v in (inputs or {}).values()
              if _is_jax_array(v) and _REAL_OF.get(str(v.dtype), str(v.dtype)) in EPS]
    return coarsest(*names)


def tolerance_dtype(opts: dict, run_dtype: str, vjp=None) -> str:
    """The dtype whose rounding the tolerance allows for: the run dtype (jax has no autocast)."""
    return run_dtype


def functions(spec, opts: dict, inputs: dict):
    """-> (fn(**inputs), vjp(g, **inputs), ad_factory, inputs), or the Verdict that ends the check."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return Verdict("error", MISSING)
    # without x64 JAX would compute the float64 reference in float32
    jax.config.update("jax_enable_x64", True)
    target = _Target.of(jax, jnp, spec, opts, inputs)
    failed = target.raised_as_called()
    if failed is not None:
        return failed
    if target.hand is not None:
        return target.fn, target.hand_vjp, target.ad_factory, target.inputs
    return target.fn, target.vjp_under_test(), target.ad_factory, target.inputs


# eq=False: its bound methods are the check's functions, hashed and compared by identity as closures are
@dataclass(frozen=True, eq=False)
class _Target:
    """One jax check's target with its dtypes and binding resolved once: the reference runs it in float64,
    the vjp under test is JAX's vjp of it in the dtype under test, at a point rounded to that dtype."""

    jax: object
    jnp: object
    spec: object
    target: object
    output: object
    wrt: object
    run_dtype: object
    dtypes: dict
    complex: set
    bound: object
    inputs: dict
    hand: object

    @classmethod
    def of(cls, jax, jnp, spec, opts: dict, inputs: dict) -> _Target:
        """The target of ``spec`` with the point rounded to the dtype under test."""
        target = spec.fn
        run_dtype = jnp.dtype(run_dtype_name(target, opts))
        # a given jax array runs in its own dtype; every other float input in the run dtype
        own = {k: jnp.dtype(_REAL_OF.get(str(v.dtype), v.dtype)) for k, v in spec.inputs.items()
               if _is_jax_array(v) and jnp.issubdtype(v.dtype, jnp.inexact)}
        complex_names = {k for k, v in inputs.items() if np.asarray(v).dtype.kind == "c"}
        dtypes = {k: own.get(k, run_dtype) for k in inputs}
        bound = bind(_parameters(target), list(spec.inputs), display_name(target))
        # the point itself in the dtype under test, so that float64 reference and gradient see one point
        rounded_inputs = {k: rounded(jnp, v, dtypes[k]) for k, v in inputs.items()}
        return cls(jax=jax, jnp=jnp, spec=spec, target=target, output=opts.get("output"), wrt=opts.get("wrt"),
                   run_dtype=run_dtype, dtypes=dtypes, complex=complex_names, bound=bound, inputs=rounded_inputs,
                   hand=spec.vjp if spec.vjp is not None else spec.grad)

    def _call(self, values: dict, of=None):
        """The target (or ``of``) called with ``values`` bound to its parameters."""
        return call_bound(self.target if of is None else of, self.bound, values)

    def _arrays(self, kw: dict, exact: bool = False) -> dict:
        """The inputs as jax arrays in float64 (``exact``) or each in its dtype under test."""
        jnp = self.jnp
        return {k: array_of(jnp, v, jnp.float64 if exact else self.dtypes.get(k, self.run_dtype))
                for k, v in kw.items()}

    def _of_wrt(self, values: dict, wrt, of=None):
        """The selected output as a function of the ``wrt`` inputs alone."""
        def of_wrt(*xs):
            # the other inputs are closed over: constants that jax.vjp does not differentiate
            return selected(self._call({**values, **dict(zip(wrt, xs))}, of), self.output)
        return of_wrt

    def wrt_of(self, kw: dict):
        """The inputs differentiated: ``wrt=``, else every float and complex one."""
        return self.wrt or [k for k, v in kw.items() if np.asarray(v).dtype.kind in "fc"]

    def raised_as_called(self):
        """The error Verdict where a custom rule raises called as users call it, else None."""
        if not _custom(self.target):
            return None
        # the reference runs the rule's .fun: a target that cannot run as users call it (no rule defined)
        # is the function failing, not its gradient
        try:
            self._call(self._arrays(self.inputs))
        except Exception as exc:  # noqa: BLE001 - the function under test raised: status error
            return Verdict("error", f"the function raised {raised_by_user_code(exc)}", user_traceback(exc))
        return None

    def fn(self, **kw):
        """The target in float64 -> numpy."""
        if any(np.iscomplexobj(v) for k, v in kw.items() if k not in self.complex):
            raise TypeError("complex step does not apply to a jax check")
        values = self._arrays(kw, exact=True)
        # the primal without its rule gives the same values, 25 times faster than the custom_vjp object
        return _to_numpy(self._call(values, self.target.fun if _custom(self.target) else self.target))

    def vjp_in(self, exact: bool):
        """JAX's vjp in the dtype under test, or (``exact``) in float64."""
        def vjp(g, /, **kw):
            return self._pullback_at(g, exact, kw)
        return vjp

    def _pullback_at(self, g, exact: bool, kw: dict) -> dict:
        """JAX's vjp of ``g`` at ``kw``, in float64 (``exact``) or the dtype under test -> numpy by name."""
        jnp = self.jnp
        wrt = self.wrt_of(kw)
        values = self._arrays(kw, exact)
        out, pullback = self.jax.vjp(self._of_wrt(values, wrt), *[values[k] for k in wrt])
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            return {k: np.zeros(np.shape(kw[k])) for k in wrt}  # an integer output does not move
        grads = _conjugated(pullback, g, out, jnp)
        # a complex gradient stays complex: the check fails one with an imaginary part for a real input
        return {k: _to_numpy(gk) for k, gk in zip(wrt, grads)}

    def vjp_of_vjp(self, v: dict, w, /, **kw):
        """The vjp differentiated as gradgradcheck does: with p(x, w) = jax.vjp(f, x)[1](w),
        ({name: (dp/dx)^T v}, (dp/dw)^T v = J v) | a skipped Verdict."""
        jax, jnp = self.jax, self.jnp
        wrt = self.wrt_of(kw)
        values = self._arrays(kw)
        of_wrt = self._of_wrt(values, wrt)
        xs = tuple(values[k] for k in wrt)
        out = jax.eval_shape(of_wrt, *xs)
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            return {k: np.zeros(np.shape(kw[k])) for k in wrt}, np.zeros(out.shape)

        def pulled(xs, wt):
            return jax.vjp(of_wrt, *xs)[1](wt)

        wt = jnp.asarray(np.asarray(w, dtype=np.float64).reshape(out.shape), dtype=out.dtype)
        vs = tuple(jnp.asarray(np.asarray(v[k], dtype=np.float64), dtype=x.dtype) for k, x in zip(wrt, xs))
        try:
            hv, jv = jax.vjp(pulled, xs, wt)[1](vs)
        except Exception as exc:  # noqa: BLE001 - JAX cannot differentiate this vjp
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return Verdict("skipped", f"first order passed; order 2 is not checked: JAX cannot differentiate the "
                                      f"vjp of {display_name(self.target)} ({type(exc).__name__}: {text})")
        return ({k: np.asarray(h).astype(np.float64) for k, h in zip(wrt, hv)},
                np.asarray(jv).astype(np.float64))

    def jvp(self, u: dict, /, **kw):
        """jax.jvp of the target in the dtype under test, through its custom_jvp rule: J u as numpy."""
        wrt = self.wrt_of(kw)
        values = self._arrays(kw)
        xs = tuple(values[k] for k in wrt)
        tangents = tuple(self.jnp.asarray(np.asarray(u[k]), dtype=x.dtype) for k, x in zip(wrt, xs))
        _, ju = self.jax.jvp(self._of_wrt(values, wrt), xs, tangents)
        return _to_numpy(ju)

    def vjp_under_test(self):
        """JAX's vjp as the pipeline calls it, with the framework's other derivatives attached."""
        vjp = self.vjp_in(False)
        vjp.framework_hvp = self.vjp_of_vjp
        if isinstance(self.target, self.jax.custom_jvp):
            jvp = self.jvp
            vjp.framework_jvp = lambda u, /, **kw: jvp(u, **kw)
            vjp.framework_jvp.label, vjp.framework_jvp.method = "JAX's jvp", "jax_jvp"
        # order 2 differentiates the gradient in float64: a float32 gradient field is a staircase to the differences
        vjp.float64 = self.vjp_in(True)
        return vjp

    def hand_vjp(self, g, **kw):
        """A hand-written vjp or gradient written with jax arrays, called with jax arrays -> numpy."""
        values = self._arrays(kw)
        if self.spec.vjp is not None:
            g = self.jnp.asarray(np.asarray(g, dtype=np.float64), dtype=self.run_dtype)
            return _to_numpy(self.hand(g, **values), True)
        return gradient_as_vjp(_to_numpy(self.hand(**values), True), g)

    def ad_factory(self, base, wrt):
        """JAX's AD of a custom rule's primal without the rule, or of a function beside its hand-written
        gradient; None where the function's own JAX AD is what is checked (no second opinion)."""
        custom = _custom(self.target)
        primal = self.target.fun if custom else self.target if self.hand is not None else None
        if primal is None:
            return None
        values = self._arrays(base, exact=True)
        return _PrimalAD(self.jax, self._of_wrt(values, wrt, primal), [values[k] for k in wrt], list(wrt),
                         "JAX's AD without the custom rule" if custom else "JAX's AD")


class _PrimalAD:
    """JAX's AD of the primal: a custom rule's ``.fun`` (the rule left out), or a function whose
    hand-written gradient is under test; the pipeline trusts it only where the differences agree."""

    method = "jax_autodiff"

    def __init__(self, jax, of_wrt, xs, wrt: list, label: str):
        self.wrt, self.label = wrt, label
        out, self.pullback = jax.vjp(of_wrt, *xs)
        self.value = _to_numpy(out)
        self.dtype, self.shape = out.dtype, out.shape

    def vjp(self, w) -> dict:
        import jax.numpy as jnp
        grads = _conjugated(self.pullback, w, self, jnp)
        return {k: _to_numpy(g) for k, g in zip(self.wrt, grads)}

    def gradient(self) -> dict:
        return self.vjp(np.ones(self.value.shape))


#: the real dtype of each complex one: a given complex jax array is checked at its parts' precision
_REAL_OF = {"complex64": "float32", "complex128": "float64"}


def _complex_of(jnp, dtype):
    return jnp.complex128 if jnp.dtype(dtype) == jnp.float64 else jnp.complex64


def rounded(jnp, v, dtype):
    """``v`` (a numpy array) rounded through ``dtype`` (its complex counterpart for a complex ``v``) and back
    to float64 or complex128: the point under test."""
    a = np.asarray(v)
    if a.dtype.kind == "c":
        return np.asarray(array_of(jnp, a, dtype)).astype(np.complex128)
    if a.dtype.kind != "f":
        return a
    return np.asarray(jnp.asarray(a.astype(np.float64), dtype=dtype)).astype(np.float64)


def array_of(jnp, v, dtype):
    """A float input as a jax array of ``dtype`` (a complex one of its complex counterpart); integers and
    booleans are constants (0-d: Python scalars, so that they serve as an axis, a count or a flag)."""
    a = np.asarray(v)
    if a.dtype.kind == "c":
        return jnp.asarray(a.astype(np.complex128), dtype=_complex_of(jnp, dtype))
    if a.dtype.kind != "f":
        return a.item() if a.ndim == 0 else jnp.asarray(a)
    return jnp.asarray(a.astype(np.float64), dtype=dtype)


def _conjugated(pullback, g, out, jnp):
    """``pullback`` (JAX's) of the cotangent ``g`` in PyTorch's convention, the one gradcli checks in: JAX
    pairs cotangents with tangents without conjugation, so its vjp of g is the conjugate of PyTorch's vjp
    of conj(g) (its grad of a real function of z is dL/dRe z - i dL/dIm z); where all is real the two agree.
    ``out``: the output's shape and dtype."""
    seed = jnp.asarray(np.conj(np.asarray(g)).reshape(out.shape), dtype=out.dtype)
    return [jnp.conj(c) if jnp.iscomplexobj(c) else c for c in pullback(seed)]


def _to_numpy(out, keep: bool = False):
    """Arrays (in tuples and lists, and with ``keep`` in dicts) as numpy, floats as float64."""
    if keep and isinstance(out, dict):
        return {k: _to_numpy(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return tuple(_to_numpy(o) for o in out)
    a = np.asarray(out)
    return a.astype(np.float64) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a
