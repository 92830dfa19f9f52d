"""The primitive table: everything gradcli knows about each function, written once, in one ``_prim`` call.

Every engine reads this table and nothing else (CONTRIBUTING.md has the recipe for a new function):

* ``value(xp, *args)`` evaluates on an array namespace (numpy, CuPy), on real or complex input;
* ``partials`` holds one rule per argument, ``rule(F, ans, *args) -> local partial``, written with
  primitives through ``F`` (an :class:`Ops` namespace) and Python operators, so the same rule runs on
  numbers, dual numbers, tape variables or graph nodes. Forward mode forms
  ``tangent = sum(partial_i * tangent_i)``, reverse mode ``adjoint_i += adjoint * partial_i``.
  A rule may return the plain number ``0.0`` (no dependence: engines skip it) or ``1.0``;
* ``sympy`` builds the symbolic counterpart. The symbolic method differentiates that with sympy's own
  rules, never with ``partials``, so that agreement between the methods means something. In the entry
  it is the name of a sympy function or ``form(S, *args)`` over :func:`sympy_namespace` (sympy plus
  gradcli's own log1p and softplus), so that importing this module never imports sympy;
* ``domain`` says where the value is defined, ``smooth`` where the derivative exists (``sqrt`` at 0),
  ``kink`` where the function is continuous but not differentiable (``abs`` at 0);
* ``holomorphic`` says whether complex-step differentiation may pass through it;
* ``sample`` is a box of ordinary arguments, used by the tests that walk the table;
* ``ufunc``, ``cuda`` and ``numba`` are the compiled batch engines' forms, ``trace_ufuncs`` the numpy
  ufuncs the tracer differentiates with ``partials``, ``args`` and ``usage`` what the parser accepts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from gradcli.core.sympy_functions import sympy_namespace


@dataclass(frozen=True)
class Primitive:
    name: str
    arity: int
    value: Callable
    partials: tuple
    sympy_form: str | Callable  # a sympy function's name, or form(S, *args): see sympy_namespace
    domain: Callable | None = None
    smooth: Callable | None = None
    kink: Callable | None = None
    holomorphic: bool = True
    sample: tuple = ()
    public: bool = True
    doc: str = ""
    domain_text: str = ""
    smooth_text: str = ""
    ufunc: tuple | None = None  # (numpy/CuPy ufunc name, extra constant arguments...), for out= buffers
    # where the function breaks: a switching function of the arguments, switch(xp, *args), whose sign
    # changes across the break, and what the break is (pole, jump or kink); used to keep difference
    # stencils and plotted lines from straddling one. Poles and jumps break the function, kinks only
    # its derivative.
    switch: Callable | None = None
    switch_kind: str = ""
    # the arguments the switch reads (empty: all); a switch whose arguments stay put cannot flip
    switch_reads: tuple = ()
    # The CUDA C expression behind the value, for the fused GPU kernel (gradcli/engines/cuda.py). "{k}" is
    # argument k: always an atom there (a local, an input or a cast constant), so a template parenthesises
    # only itself. It holds for float and double alike: the math functions are CUDA's overloads, and
    # every literal is a cast to the kernel's element type T, so a float kernel never computes in double.
    # Each mirrors ``value`` down to NaN and infinities: C's fmax/fmin drop a NaN where numpy's
    # maximum/minimum keep it, and copysign(1, nan) is +-1 where numpy.sign(nan) is nan, so those are
    # ternaries written as numpy's own loops are.
    cuda: str | None = None
    # The numba engine's form (gradcli/engines/numba_engine.py): a scalar function of the float
    # arguments written with ``math`` and operators only (numba compiles it into an elementwise loop),
    # or the name of a vectorised loop in gradcli/engines/vecmath.py where speed needs one. Like
    # ``cuda`` it follows numpy's ufunc to the special values (NaN propagation, -inf of log at 0).
    numba: str | Callable | None = None
    trace_ufuncs: tuple = ()  # numpy ufuncs (by name) whose traced derivative is ``partials``
    args: tuple = ()  # (fewest, most) arguments the parser accepts, most None for no limit
    usage: str = ""  # the call as the parser's error messages show it
    # the result is exactly its arguments' value (no rounding: neg, abs, sign, min, max, relu, step), so
    # it adds nothing to a first-order rounding bound (gradcli.methods.differences.rounding_scale)
    exact: bool = False

    @property
    def sympy(self) -> Callable:
        """The symbolic counterpart as a function of sympy arguments (imports sympy on first use)."""
        S, form = sympy_namespace(), self.sympy_form
        return getattr(S, form) if isinstance(form, str) else lambda *args: form(S, *args)


PRIMITIVES: dict[str, Primitive] = {}


def _prim(name, arity, value, partials, sym, **kw):
    if not isinstance(partials, tuple):
        partials = (partials,)
    assert len(partials) == arity, name
    kw.setdefault("sample", ((-2.0, 2.0),) * arity)
    ufunc = kw.get("ufunc")
    # a ufunc with constant arguments (relu is maximum(x, 0)) is not the function numpy code calls
    kw.setdefault("trace_ufuncs", ufunc[:1] if ufunc is not None and len(ufunc) == 1 else ())
    kw.setdefault("args", (arity, arity))
    kw.setdefault("usage", f"{name}(x)" if arity == 1 else f"{name}(x, y)")
    PRIMITIVES[name] = Primitive(name, arity, value, partials, sym, **kw)


class Ops:
    """The primitives over some kind of value, as ``F.sin(x)``; partial rules are written against it."""

    def apply(self, name, *args):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __getattr__(self, name):
        if name in PRIMITIVES:
            return lambda *args: self.apply(name, *args)
        raise AttributeError(name)


class NumericOps(Ops):
    """Primitives evaluated on an array namespace (numpy by default)."""

    def __init__(self, xp=np):
        self.xp = xp

    def apply(self, name, *args):
        return PRIMITIVES[name].value(self.xp, *args)


def is_complex(xp, x) -> bool:
    return xp.iscomplexobj(x)


# --- values that need more than one numpy call -----------------------------------------------------

def _erf_numpy():
    try:  # scipy is optional: use its vectorised erf when it is there
        from scipy import special

        return special.erf, special.erfc
    except Exception:  # pragma: no cover - depends on the environment
        return (np.vectorize(math.erf, otypes=[np.float64]), np.vectorize(math.erfc, otypes=[np.float64]))


_ERF = None


def _erf_pair(xp):
    global _ERF
    if xp is not np:
        from cupyx.scipy import special  # CuPy namespace: its own kernels

        return special.erf, special.erfc
    if _ERF is None:
        _ERF = _erf_numpy()
    return _ERF


def _erf(xp, x):
    out = _erf_pair(xp)[0](x)
    return out.astype(x.dtype, copy=False) if hasattr(x, "dtype") and hasattr(out, "astype") else out


def _erfc(xp, x):
    out = _erf_pair(xp)[1](x)
    return out.astype(x.dtype, copy=False) if hasattr(x, "dtype") and hasattr(out, "astype") else out


def _sigmoid(xp, x):
    if is_complex(xp, x):  # the branch by the sign of the real part keeps exp from overflowing
        return xp.where(x.real >= 0, 1 / (1 + xp.exp(-x)), xp.exp(x) / (1 + xp.exp(x)))
    # exp of a negative number only: no overflow for large |x|
    z = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


def _softplus(xp, x):
    if is_complex(xp, x):
        return xp.where(x.real > 0, x + xp.log1p(xp.exp(-x)), xp.log1p(xp.exp(x)))
    return xp.logaddexp(0, x)


def _pow(xp, x, y):
    return xp.power(x, y)


def _pow_domain(xp, x, y):
    integral = y == xp.round(y)
    return (x > 0) | ((x == 0) & (y > 0)) | ((x < 0) & integral) | ((x == 0) & (y == 0))


def _plain(F, *vals):
    """The array namespace of ``vals`` where they are plain numbers or arrays (evaluated by
    :class:`NumericOps`, on numpy or a GPU's namespace), else None (dual numbers, graph nodes...)."""
    if isinstance(F, NumericOps):
        return F.xp
    return np if all(isinstance(v, (int, float, np.floating, np.ndarray)) for v in vals) else None


def _pow_dx(F, x, y):
    # x**1 has derivative 1 and x**0 derivative 0, also at x = 0 where y*x**(y-1) is 0*inf
    if isinstance(y, (int, float, np.floating)) and y in (0, 1):
        return float(y)
    d = y * x ** (y - 1)
    xp = _plain(F, x, y)
    if xp is not None:
        d = xp.where(y == 0, 0.0, d)
    return d


def _pow_dy(F, a, x, y):
    # 0**y is 0 for every y > 0, so its slope in y is 0 there, where log(0) * 0 is nan
    xp = _plain(F, a, x, y)
    if xp is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.where((x == 0) & (y > 0), 0.0, xp.log(x) * a)
    return F.log(x) * a


def _numba_pow(a, b):
    # numpy's power takes x**0.5 as sqrt(x): sqrt(-0.0) is -0.0 and sqrt(-inf) NaN, where C's pow gives
    # +0.0 and +inf (-0.0 >= 0 holds, so it reaches math.sqrt)
    if b == 0.5:
        return math.sqrt(a) if a >= 0 else math.nan
    return a ** b


def _acosh_partial(F, ans, x):
    # sqrt(x-1)*sqrt(x+1): keeps its digits near x = 1, where x*x - 1 cancels, and does not overflow
    # above x = 1.3e154, where (x-1)*(x+1) does and the partial would read 0
    return 1 / (F.sqrt(x - 1) * F.sqrt(x + 1))


def _tie(F, d):
    """1 where d > 0, 0 where d < 0 and 1/2 at a tie, as PyTorch's maximum/minimum: min(x, x) is x,
    and its two partials must add up to 1."""
    return 0.5 * (1.0 + F.sign(d))


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_NAN, _INF = math.nan, math.inf

# --- arithmetic ------------------------------------------------------------------------------------
_prim("add", 2, lambda xp, x, y: x + y, (lambda F, a, x, y: 1.0, lambda F, a, x, y: 1.0),
      lambda S, x, y: x + y, public=False, doc="x + y", ufunc=("add",), cuda="({0} + {1})",
      numba=lambda a, b: a + b)
_prim("sub", 2, lambda xp, x, y: x - y, (lambda F, a, x, y: 1.0, lambda F, a, x, y: -1.0),
      lambda S, x, y: x - y, public=False, doc="x - y", ufunc=("subtract",), cuda="({0} - {1})",
      numba=lambda a, b: a - b)
_prim("mul", 2, lambda xp, x, y: x * y, (lambda F, a, x, y: y, lambda F, a, x, y: x),
      lambda S, x, y: x * y, public=False, doc="x * y", ufunc=("multiply",), cuda="({0} * {1})",
      numba=lambda a, b: a * b)
_prim("div", 2, lambda xp, x, y: x / y, (lambda F, a, x, y: 1 / y, lambda F, a, x, y: -a / y),
      lambda S, x, y: x / y, public=False, doc="x / y", sample=((-2.0, 2.0), (0.5, 2.0)),
      domain=lambda xp, x, y: y != 0, domain_text="divisor != 0", ufunc=("divide",),
      switch=lambda xp, x, y: y, switch_kind="pole", switch_reads=(1,), cuda="({0} / {1})",
      numba=lambda a, b: a / b)
_prim("neg", 1, lambda xp, x: -x, lambda F, a, x: -1.0, lambda S, x: -x, public=False, doc="-x",
      ufunc=("negative",), cuda="(-{0})", numba=lambda a: -a, exact=True)
_prim("pow", 2, _pow,
      (lambda F, a, x, y: _pow_dx(F, x, y), _pow_dy),
      # sympy's 0**y differentiates to 0**y*log(0), nan at y > 0, where the function is 0
      lambda S, x, y: S.Piecewise((0, y > 0), (1, S.Eq(y, 0)), (S.zoo, True)) if x == 0 else x ** y, doc="x ** y, x ^ y, pow(x, y)", sample=((0.3, 2.5), (-2.0, 2.0)),
      domain=_pow_domain, domain_text="x > 0, or x < 0 with an integer exponent",
      ufunc=("power",), trace_ufuncs=("power", "float_power"),
      switch=lambda xp, x, y: xp.where(y < 0, x, xp.nan), switch_kind="pole",  # x**-2 at 0
      cuda="pow({0}, {1})", numba=_numba_pow)

# --- trigonometric ---------------------------------------------------------------------------------
_prim("sin", 1, lambda xp, x: xp.sin(x), lambda F, a, x: F.cos(x), "sin", sample=((-3.0, 3.0),),
      ufunc=("sin",), cuda="sin({0})", numba="sin")
_prim("cos", 1, lambda xp, x: xp.cos(x), lambda F, a, x: -F.sin(x), "cos", sample=((-3.0, 3.0),),
      ufunc=("cos",), cuda="cos({0})", numba="cos")
_prim("tan", 1, lambda xp, x: xp.tan(x), lambda F, a, x: 1 + a * a, "tan", sample=((-1.3, 1.3),),
      ufunc=("tan",), switch=lambda xp, x: xp.cos(x), switch_kind="pole", cuda="tan({0})",
      numba=lambda a: math.tan(a))
def _blend(s, t):
    """``s``, with its derivatives taken from ``t`` where |s| is near 1: s and t are one function in two
    forms, s the one whose value keeps its digits, t the one whose derivative does where |s| -> 1
    (1 - x*x at tiny x, where (1-x)*(1+x) differentiates into (1+x) - (1-x) = 1 - 1). s + s*s*(t - s) is
    both; its derivative (1 - s*s)*s' + s*s*t' weighs each form's where that form is the accurate one,
    and the value moves by s*s times t's rounding, which is within s's own."""
    return s + s * s * (t - s)


def _one_minus_square(F, x):
    """1 - x*x for |x| <= 1: (1-x)*(1+x) keeps its digits near x = +-1, 1 - x*x keeps its derivative
    -2x at tiny x (the second derivatives of asin, acos and atanh there are of order x)."""
    return _blend((1 - x) * (1 + x), 1 - x * x)


_prim("asin", 1, lambda xp, x: xp.arcsin(x), lambda F, a, x: 1 / F.sqrt(_one_minus_square(F, x)), "asin",
      domain=lambda xp, x: abs(x) <= 1, smooth=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),),
      domain_text="-1 <= x <= 1", smooth_text="-1 < x < 1", ufunc=("arcsin",), cuda="asin({0})",
      numba=lambda a: math.asin(a) if abs(a) <= 1 else _NAN)
_prim("acos", 1, lambda xp, x: xp.arccos(x), lambda F, a, x: -1 / F.sqrt(_one_minus_square(F, x)), "acos",
      domain=lambda xp, x: abs(x) <= 1, smooth=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),),
      domain_text="-1 <= x <= 1", smooth_text="-1 < x < 1", ufunc=("arccos",), cuda="acos({0})",
      numba=lambda a: math.acos(a) if abs(a) <= 1 else _NAN)
def _atan_partial(F, ans, x):
    # 1/(1 + x*x) as (1/hypot(x, 1))**2: x*x overflows from |x| = 1.3e154 on, and its derivative
    # -2x/(1 + x*x)**2 meets 1/(1 + x*x)**2 = 1e-400 (0) at x = 1e100, where the second derivative is -2e-300
    if getattr(getattr(x, "dtype", None), "kind", "") == "c":  # complex operands: hypot is not holomorphic
        return 1 / (1 + x * x)
    u = 1 / F.hypot(x, 1)
    return u * u


_prim("atan", 1, lambda xp, x: xp.arctan(x), _atan_partial, "atan",
      sample=((-3.0, 3.0),), ufunc=("arctan",), cuda="atan({0})", numba=lambda a: math.atan(a))
_prim("atan2", 2, lambda xp, y, x: xp.arctan2(y, x),
      # x/(x*x + y*y) written through hypot: x*x underflows from |x| = 1e-154 on
      (lambda F, a, y, x: x / F.hypot(x, y) / F.hypot(x, y), lambda F, a, y, x: -y / F.hypot(x, y) / F.hypot(x, y)),
      "atan2", domain=lambda xp, y, x: (x != 0) | (y != 0), holomorphic=False,
      kink=lambda xp, y, x: (y == 0) & (x < 0),  # the branch cut: a jump from pi to -pi
      sample=((-2.0, 2.0), (0.5, 2.0)), doc="atan2(y, x), numpy's argument order",
      domain_text="(y, x) != (0, 0)", ufunc=("arctan2",), usage="atan2(y, x)",
      switch=lambda xp, y, x: xp.where(x < 0, y, xp.nan), switch_kind="jump",  # the cut along x < 0
      cuda="atan2({0}, {1})", numba=lambda a, b: math.atan2(a, b))

# --- hyperbolic ------------------------------------------------------------------------------------
_prim("sinh", 1, lambda xp, x: xp.sinh(x), lambda F, a, x: F.cosh(x), "sinh", ufunc=("sinh",),
      cuda="sinh({0})", numba=lambda a: math.sinh(a))
_prim("cosh", 1, lambda xp, x: xp.cosh(x), lambda F, a, x: F.sinh(x), "cosh", ufunc=("cosh",),
      cuda="cosh({0})", numba="cosh")
def _tanh_partial(F, ans, x):
    # sech(x)**2 as 4e/(1 + e)**2 with e = exp(-2|x|): 1 - tanh**2 is 0 in float64 from |x| = 19 on,
    # and 1/cosh**2, though it keeps its digits, differentiates into inf/inf once cosh overflows at
    # |x| = 710 (the Hessian of tanh at 711 read nan); |x|'s kink at 0 is harmless, sech**2 being even
    # blended with 1 - a*a (a = tanh(x)), whose derivative -2*a*a' keeps the second derivative's -2x at
    # tiny x, where 4e/(1 + e)**2 differentiates into a difference of terms of 1
    e = F.exp(-2 * F.abs(x))
    return _blend(4 * e / ((1 + e) * (1 + e)), 1 - ans * ans)


_prim("tanh", 1, lambda xp, x: xp.tanh(x), _tanh_partial, "tanh",
      ufunc=("tanh",), cuda="tanh({0})", numba="tanh")
# 1/hypot(x, 1), not 1/sqrt(x*x + 1): x*x overflows from |x| = 1.3e154 on, and the partial would read 0
_prim("asinh", 1, lambda xp, x: xp.arcsinh(x), lambda F, a, x: 1 / F.hypot(x, 1), "asinh",
      ufunc=("arcsinh",), cuda="asinh({0})", numba=lambda a: math.asinh(a))
_prim("acosh", 1, lambda xp, x: xp.arccosh(x), _acosh_partial, "acosh",
      domain=lambda xp, x: x >= 1, smooth=lambda xp, x: x > 1, sample=((1.1, 3.0),),
      domain_text="x >= 1", smooth_text="x > 1", ufunc=("arccosh",), cuda="acosh({0})",
      numba=lambda a: math.acosh(a) if a >= 1 else _NAN)
_prim("atanh", 1, lambda xp, x: xp.arctanh(x), lambda F, a, x: 1 / _one_minus_square(F, x), "atanh",
      domain=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),), domain_text="-1 < x < 1",
      ufunc=("arctanh",), cuda="atanh({0})",
      numba=lambda a: math.atanh(a) if abs(a) < 1 else (math.copysign(_INF, a) if abs(a) == 1 else _NAN))

# --- exponential and logarithmic -------------------------------------------------------------------
_prim("exp", 1, lambda xp, x: xp.exp(x), lambda F, a, x: a, "exp", ufunc=("exp",), cuda="exp({0})",
      numba="exp")
_prim("expm1", 1, lambda xp, x: xp.expm1(x), lambda F, a, x: F.exp(x), lambda S, x: S.exp(x) - 1,
      ufunc=("expm1",), cuda="expm1({0})", numba=lambda a: math.expm1(a))
_prim("log", 1, lambda xp, x: xp.log(x), lambda F, a, x: 1 / x, "log",
      domain=lambda xp, x: x > 0, sample=((0.2, 4.0),), domain_text="x > 0", doc="natural log; also ln",
      ufunc=("log",), args=(1, 2), usage="log(x) or log(x, b)", cuda="log({0})", numba="log")
_prim("log2", 1, lambda xp, x: xp.log2(x), lambda F, a, x: 1 / (x * _LN2),
      lambda S, x: S.log(x) / S.log(2), domain=lambda xp, x: x > 0, sample=((0.2, 4.0),),
      domain_text="x > 0", ufunc=("log2",), cuda="log2({0})",
      numba=lambda a: math.log2(a) if a > 0 else (-_INF if a == 0 else _NAN))
_prim("log10", 1, lambda xp, x: xp.log10(x), lambda F, a, x: 1 / (x * _LN10),
      lambda S, x: S.log(x) / S.log(10), domain=lambda xp, x: x > 0, sample=((0.2, 4.0),),
      domain_text="x > 0", ufunc=("log10",), cuda="log10({0})",
      numba=lambda a: math.log10(a) if a > 0 else (-_INF if a == 0 else _NAN))
_prim("log1p", 1, lambda xp, x: xp.log1p(x), lambda F, a, x: 1 / (1 + x), "log1p",
      domain=lambda xp, x: x > -1, sample=((-0.8, 3.0),), domain_text="x > -1", ufunc=("log1p",),
      cuda="log1p({0})", numba=lambda a: math.log1p(a) if a > -1 else (-_INF if a == -1 else _NAN))
_prim("sqrt", 1, lambda xp, x: xp.sqrt(x), lambda F, a, x: 0.5 / a, "sqrt",
      domain=lambda xp, x: x >= 0, smooth=lambda xp, x: x > 0, sample=((0.1, 4.0),),
      domain_text="x >= 0", smooth_text="x > 0", ufunc=("sqrt",), cuda="sqrt({0})",
      numba=lambda a: math.sqrt(a) if a >= 0 else _NAN)
_prim("cbrt", 1, lambda xp, x: xp.cbrt(x), lambda F, a, x: 1 / (3 * a * a),
      lambda S, x: S.sign(x) * S.Abs(x) ** S.Rational(1, 3),
      smooth=lambda xp, x: x != 0, holomorphic=False, sample=((0.2, 3.0),),
      doc="real cube root, also of negative x", smooth_text="x != 0", ufunc=("cbrt",),
      switch=lambda xp, x: x, switch_kind="kink",  # continuous, with an infinite derivative at 0
      cuda="cbrt({0})", numba=lambda a: np.cbrt(a))

# --- piecewise: kinks, no complex step -------------------------------------------------------------
_prim("abs", 1, lambda xp, x: xp.abs(x), lambda F, a, x: F.sign(x), "Abs",
      kink=lambda xp, x: x == 0, holomorphic=False, ufunc=("absolute",), trace_ufuncs=("absolute", "fabs"),
      switch=lambda xp, x: x, switch_kind="kink", cuda="fabs({0})", numba=lambda a: abs(a), exact=True)
_prim("sign", 1, lambda xp, x: xp.sign(x), lambda F, a, x: 0.0, "sign",
      kink=lambda xp, x: x == 0, holomorphic=False, doc="-1, 0 or 1 (a jump at 0)", ufunc=("sign",),
      trace_ufuncs=(),  # the tracer routes np.sign as a constant: its derivative is 0 where it exists
      switch=lambda xp, x: x, switch_kind="jump",
      cuda="({0} > T(0) ? T(1) : ({0} < T(0) ? T(-1) : ({0} == T(0) ? T(0) : {0})))",
      numba=lambda a: 1.0 if a > 0 else (-1.0 if a < 0 else a), exact=True)  # 0, -0 and NaN as numpy's sign
_prim("relu", 1, lambda xp, x: xp.maximum(x, 0), lambda F, a, x: F.step(x),
      lambda S, x: S.Max(x, 0), kink=lambda xp, x: x == 0, holomorphic=False, doc="max(x, 0)",
      ufunc=("maximum", 0.0), switch=lambda xp, x: x, switch_kind="kink",
      cuda="(({0} > T(0) || isnan({0})) ? {0} : T(0))", numba=lambda a: a if (a != a or a >= 0.0) else 0.0,
      exact=True)
_prim("min", 2, lambda xp, x, y: xp.minimum(x, y),
      (lambda F, a, x, y: _tie(F, y - x), lambda F, a, x, y: _tie(F, x - y)),
      "Min", kink=lambda xp, x, y: x == y, holomorphic=False, sample=((-2.0, 2.0), (-2.0, 2.0)),
      doc="min(a, b, ...): two or more arguments", args=(2, None), usage="min(a, b, ...)",
      # ties x == y are kinks; the table's step(0) = 0 gives neither side a derivative there
      ufunc=("minimum",), trace_ufuncs=("minimum", "fmin"), switch=lambda xp, x, y: x - y,
      switch_kind="kink", cuda="(({0} < {1} || isnan({0})) ? {0} : {1})",
      numba=lambda a, b: a if a != a else (b if b != b else (a if a <= b else b)), exact=True)
_prim("max", 2, lambda xp, x, y: xp.maximum(x, y),
      (lambda F, a, x, y: _tie(F, x - y), lambda F, a, x, y: _tie(F, y - x)),
      "Max", kink=lambda xp, x, y: x == y, holomorphic=False, sample=((-2.0, 2.0), (-2.0, 2.0)),
      doc="max(a, b, ...): two or more arguments", args=(2, None), usage="max(a, b, ...)",
      ufunc=("maximum",), trace_ufuncs=("maximum", "fmax"), switch=lambda xp, x, y: x - y,
      switch_kind="kink", cuda="(({0} > {1} || isnan({0})) ? {0} : {1})",
      numba=lambda a, b: a if a != a else (b if b != b else (a if a >= b else b)), exact=True)
def _hypot_partial(F, h, x, y):
    """dh/dx = x/h, blended with sign(x)*(1 - y*y/(h*(h + |x|))) (the same, as 1 - |x|/h written without
    its cancellation): d(x/h)/dx = 1/h - x*x/h**3 is the difference of two terms 1e100 times its y*y/h**3
    where |y| << |x|, the second form's derivative is that product itself."""
    rest = (y / h) * (y / (h + F.abs(x)))  # each factor <= 1: y*y would overflow from 1.3e154 on
    return _blend(x / h, F.sign(x) * (1 - rest))


_prim("hypot", 2, lambda xp, x, y: xp.hypot(x, y),
      (lambda F, a, x, y: _hypot_partial(F, a, x, y), lambda F, a, x, y: _hypot_partial(F, a, y, x)),
      lambda S, x, y: S.sqrt(x * x + y * y), kink=lambda xp, x, y: (x == 0) & (y == 0),
      holomorphic=False, sample=((-2.0, 2.0), (0.5, 2.0)), doc="sqrt(x**2 + y**2) without overflow",
      ufunc=("hypot",), switch=lambda xp, x, y: xp.where(abs(x) >= abs(y), x, y),  # the cone's tip
      switch_kind="kink", cuda="hypot({0}, {1})", numba=lambda a, b: math.hypot(a, b))
# step is not in the language: it is what the partials of relu, min and max are made of.
_prim("step", 1, lambda xp, x: (x > 0).astype(x.dtype) if hasattr(x, "astype") else float(x > 0),
      lambda F, a, x: 0.0, "Heaviside", holomorphic=False, public=False,
      doc="1 where x > 0, else 0", ufunc=("heaviside", 0.0), switch=lambda xp, x: x, switch_kind="jump",
      cuda="({0} > T(0) ? T(1) : T(0))", numba=lambda a: 1.0 if a > 0 else (0.0 if a <= 0 else a), exact=True)

# --- special functions ------------------------------------------------------------------------------
_prim("erf", 1, _erf, lambda F, a, x: _TWO_OVER_SQRT_PI * F.exp(-(x * x)), "erf", holomorphic=False,
      cuda="erf({0})", numba=lambda a: math.erf(a))
_prim("erfc", 1, _erfc, lambda F, a, x: -_TWO_OVER_SQRT_PI * F.exp(-(x * x)), "erfc",
      holomorphic=False, cuda="erfc({0})", numba=lambda a: math.erfc(a))
# sigmoid(x) * sigmoid(-x), not a * (1 - a): the latter is 0 in float64 from x = 37 on. The CUDA and
# numba forms are _sigmoid and _softplus (logaddexp) operation for operation.
_prim("sigmoid", 1, _sigmoid, lambda F, a, x: a * F.sigmoid(-x), lambda S, x: 1 / (1 + S.exp(-x)),
      sample=((-4.0, 4.0),), doc="1 / (1 + exp(-x))",
      cuda="({0} >= T(0) ? T(1) / (T(1) + exp(-fabs({0}))) : exp(-fabs({0})) / (T(1) + exp(-fabs({0}))))",
      numba="sigmoid")
_prim("softplus", 1, _softplus, lambda F, a, x: F.sigmoid(x), "softplus",
      sample=((-4.0, 4.0),), doc="log(1 + exp(x))", cuda="(({0} > T(0) ? {0} : T(0)) + log1p(exp(-fabs({0}))))",
      numba=lambda a: a if a != a else max(a, 0.0) + math.log1p(math.exp(-abs(a))))  # logaddexp(0, a)

#: Names the parser accepts as functions, besides the primitives: alias -> primitive.
ALIASES = {"ln": "log"}

FUNCTION_NAMES: tuple[str, ...] = tuple(sorted({n for n, p in PRIMITIVES.items() if p.public} | set(ALIASES)))
CONSTANTS = {"pi": math.pi, "e": math.e}


def sympy_constant(name: str):
    S = sympy_namespace()
    return {"pi": S.pi, "e": S.E}[name]
