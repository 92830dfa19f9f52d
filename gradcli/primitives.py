"""The primitive table: everything gradcli knows about each function, written once.

Every method reads this table and nothing else:

* ``value(xp, *args)`` evaluates on an array namespace (numpy, CuPy), on real or complex input;
* ``partials`` holds one rule per argument, ``rule(F, ans, *args) -> local partial``, written with
  primitives through ``F`` (an :class:`Ops` namespace) and Python operators, so the same rule runs on
  numbers, dual numbers, tape variables or graph nodes. Forward mode forms
  ``tangent = sum(partial_i * tangent_i)``, reverse mode ``adjoint_i += adjoint * partial_i``.
  A rule may return the plain number ``0.0`` (no dependence: engines skip it) or ``1.0``;
* ``sympy`` builds the symbolic counterpart. The symbolic method differentiates that with sympy's own
  rules, never with ``partials``, so that agreement between the methods means something;
* ``domain`` says where the value is defined, ``smooth`` where the derivative exists (``sqrt`` at 0),
  ``kink`` where the function is continuous but not differentiable (``abs`` at 0);
* ``holomorphic`` says whether complex-step differentiation may pass through it;
* ``sample`` is a box of ordinary arguments, used by the tests that walk the table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import sympy


@dataclass(frozen=True)
class Primitive:
    name: str
    arity: int
    value: Callable
    partials: tuple
    sympy: Callable
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
    # stencils and plotted lines from straddling one
    switch: Callable | None = None
    switch_kind: str = ""
    cuda: str | None = None  # CUDA C expression template over "{0}", "{1}" (see _CUDA)


PRIMITIVES: dict[str, Primitive] = {}


def _prim(name, arity, value, partials, sym, **kw):
    if not isinstance(partials, tuple):
        partials = (partials,)
    assert len(partials) == arity, name
    kw.setdefault("sample", ((-2.0, 2.0),) * arity)
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


class log1p(sympy.Function):  # noqa: N801 - printed as the language writes it
    """log(1 + x) for sympy, evaluated by mpmath's log1p: sympy's own log(1 + x) rounds 1 + x at its
    working precision and gives 0 for x = 1e-200, then an undefined reference downstream."""

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.S.Zero

    def fdiff(self, argindex=1):
        return 1 / (1 + self.args[0])

    def _eval_evalf(self, prec):
        return _mp_evalf(self.args[0], prec, lambda mp, a: mp.log1p(a))


class softplus(sympy.Function):  # noqa: N801
    """log(1 + exp(x)) for sympy, evaluated as mpmath's log1p(exp(x)) for the same reason."""

    def fdiff(self, argindex=1):
        return 1 / (1 + sympy.exp(-self.args[0]))

    def _eval_evalf(self, prec):
        return _mp_evalf(self.args[0], prec, lambda mp, a: mp.log1p(mp.exp(a)))


def _mp_evalf(arg, prec, f):
    import mpmath
    from mpmath.libmp import prec_to_dps

    a = arg.evalf(prec_to_dps(prec) + 10)
    if not (a.is_Number and a.is_real):
        return None
    with mpmath.workprec(prec + 30):
        v = f(mpmath.mp, a._to_mpmath(prec + 30))
    return sympy.Float(v, precision=prec) if mpmath.isfinite(v) and not isinstance(v, mpmath.mpc) else None


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


def _pow_dx(x, y):
    # x**1 has derivative 1, also at x = 0 where y*x**(y-1) differentiates to 0*inf
    if isinstance(y, (int, float, np.floating)) and y == 1:
        return 1.0
    return y * x ** (y - 1)


def _acosh_partial(F, ans, x):
    # (x-1)(x+1) keeps its digits near x = 1, where x*x - 1 cancels
    return 1 / F.sqrt((x - 1) * (x + 1))


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# --- arithmetic ------------------------------------------------------------------------------------
_prim("add", 2, lambda xp, x, y: x + y, (lambda F, a, x, y: 1.0, lambda F, a, x, y: 1.0),
      lambda x, y: x + y, public=False, doc="x + y")
_prim("sub", 2, lambda xp, x, y: x - y, (lambda F, a, x, y: 1.0, lambda F, a, x, y: -1.0),
      lambda x, y: x - y, public=False, doc="x - y")
_prim("mul", 2, lambda xp, x, y: x * y, (lambda F, a, x, y: y, lambda F, a, x, y: x),
      lambda x, y: x * y, public=False, doc="x * y")
_prim("div", 2, lambda xp, x, y: x / y, (lambda F, a, x, y: 1 / y, lambda F, a, x, y: -a / y),
      lambda x, y: x / y, public=False, doc="x / y", sample=((-2.0, 2.0), (0.5, 2.0)),
      domain=lambda xp, x, y: y != 0, domain_text="divisor != 0")
_prim("neg", 1, lambda xp, x: -x, lambda F, a, x: -1.0, lambda x: -x, public=False, doc="-x")
_prim("pow", 2, _pow,
      (lambda F, a, x, y: _pow_dx(x, y), lambda F, a, x, y: F.log(x) * a),
      lambda x, y: x ** y, doc="x ** y, x ^ y, pow(x, y)", sample=((0.3, 2.5), (-2.0, 2.0)),
      domain=_pow_domain, domain_text="x > 0, or x < 0 with an integer exponent")

# --- trigonometric ---------------------------------------------------------------------------------
_prim("sin", 1, lambda xp, x: xp.sin(x), lambda F, a, x: F.cos(x), sympy.sin, sample=((-3.0, 3.0),))
_prim("cos", 1, lambda xp, x: xp.cos(x), lambda F, a, x: -F.sin(x), sympy.cos, sample=((-3.0, 3.0),))
_prim("tan", 1, lambda xp, x: xp.tan(x), lambda F, a, x: 1 + a * a, sympy.tan, sample=((-1.3, 1.3),))
_prim("asin", 1, lambda xp, x: xp.arcsin(x), lambda F, a, x: 1 / F.sqrt((1 - x) * (1 + x)), sympy.asin,
      domain=lambda xp, x: abs(x) <= 1, smooth=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),),
      domain_text="-1 <= x <= 1", smooth_text="-1 < x < 1")
_prim("acos", 1, lambda xp, x: xp.arccos(x), lambda F, a, x: -1 / F.sqrt((1 - x) * (1 + x)), sympy.acos,
      domain=lambda xp, x: abs(x) <= 1, smooth=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),),
      domain_text="-1 <= x <= 1", smooth_text="-1 < x < 1")
_prim("atan", 1, lambda xp, x: xp.arctan(x), lambda F, a, x: 1 / (1 + x * x), sympy.atan,
      sample=((-3.0, 3.0),))
_prim("atan2", 2, lambda xp, y, x: xp.arctan2(y, x),
      # x/(x*x + y*y) written through hypot: x*x underflows from |x| = 1e-154 on
      (lambda F, a, y, x: x / F.hypot(x, y) / F.hypot(x, y), lambda F, a, y, x: -y / F.hypot(x, y) / F.hypot(x, y)),
      sympy.atan2, domain=lambda xp, y, x: (x != 0) | (y != 0), holomorphic=False,
      kink=lambda xp, y, x: (y == 0) & (x < 0),  # the branch cut: a jump from pi to -pi
      sample=((-2.0, 2.0), (0.5, 2.0)), doc="atan2(y, x), numpy's argument order",
      domain_text="(y, x) != (0, 0)")

# --- hyperbolic ------------------------------------------------------------------------------------
_prim("sinh", 1, lambda xp, x: xp.sinh(x), lambda F, a, x: F.cosh(x), sympy.sinh)
_prim("cosh", 1, lambda xp, x: xp.cosh(x), lambda F, a, x: F.sinh(x), sympy.cosh)
# 1 - tanh**2 is 0 in float64 from |x| = 19 on; 1/cosh**2 keeps every digit until it underflows
_prim("tanh", 1, lambda xp, x: xp.tanh(x), lambda F, a, x: 1 / (F.cosh(x) * F.cosh(x)), sympy.tanh)
_prim("asinh", 1, lambda xp, x: xp.arcsinh(x), lambda F, a, x: 1 / F.sqrt(x * x + 1), sympy.asinh)
_prim("acosh", 1, lambda xp, x: xp.arccosh(x), _acosh_partial, sympy.acosh,
      domain=lambda xp, x: x >= 1, smooth=lambda xp, x: x > 1, sample=((1.1, 3.0),),
      domain_text="x >= 1", smooth_text="x > 1")
_prim("atanh", 1, lambda xp, x: xp.arctanh(x), lambda F, a, x: 1 / ((1 - x) * (1 + x)), sympy.atanh,
      domain=lambda xp, x: abs(x) < 1, sample=((-0.9, 0.9),), domain_text="-1 < x < 1")

# --- exponential and logarithmic -------------------------------------------------------------------
_prim("exp", 1, lambda xp, x: xp.exp(x), lambda F, a, x: a, sympy.exp)
_prim("expm1", 1, lambda xp, x: xp.expm1(x), lambda F, a, x: F.exp(x),
      lambda x: sympy.exp(x) - 1)
_prim("log", 1, lambda xp, x: xp.log(x), lambda F, a, x: 1 / x, sympy.log,
      domain=lambda xp, x: x > 0, sample=((0.2, 4.0),), domain_text="x > 0", doc="natural log; also ln")
_prim("log2", 1, lambda xp, x: xp.log2(x), lambda F, a, x: 1 / (x * _LN2),
      lambda x: sympy.log(x) / sympy.log(2), domain=lambda xp, x: x > 0, sample=((0.2, 4.0),),
      domain_text="x > 0")
_prim("log10", 1, lambda xp, x: xp.log10(x), lambda F, a, x: 1 / (x * _LN10),
      lambda x: sympy.log(x) / sympy.log(10), domain=lambda xp, x: x > 0, sample=((0.2, 4.0),),
      domain_text="x > 0")
_prim("log1p", 1, lambda xp, x: xp.log1p(x), lambda F, a, x: 1 / (1 + x), log1p,
      domain=lambda xp, x: x > -1, sample=((-0.8, 3.0),), domain_text="x > -1")
_prim("sqrt", 1, lambda xp, x: xp.sqrt(x), lambda F, a, x: 0.5 / a, sympy.sqrt,
      domain=lambda xp, x: x >= 0, smooth=lambda xp, x: x > 0, sample=((0.1, 4.0),),
      domain_text="x >= 0", smooth_text="x > 0")
_prim("cbrt", 1, lambda xp, x: xp.cbrt(x), lambda F, a, x: 1 / (3 * a * a),
      lambda x: sympy.sign(x) * sympy.Abs(x) ** sympy.Rational(1, 3),
      smooth=lambda xp, x: x != 0, holomorphic=False, sample=((0.2, 3.0),),
      doc="real cube root, also of negative x", smooth_text="x != 0")

# --- piecewise: kinks, no complex step -------------------------------------------------------------
_prim("abs", 1, lambda xp, x: xp.abs(x), lambda F, a, x: F.sign(x), sympy.Abs,
      kink=lambda xp, x: x == 0, holomorphic=False)
_prim("sign", 1, lambda xp, x: xp.sign(x), lambda F, a, x: 0.0, sympy.sign,
      kink=lambda xp, x: x == 0, holomorphic=False, doc="-1, 0 or 1 (a jump at 0)")
_prim("relu", 1, lambda xp, x: xp.maximum(x, 0), lambda F, a, x: F.step(x),
      lambda x: sympy.Max(x, 0), kink=lambda xp, x: x == 0, holomorphic=False, doc="max(x, 0)")
def _tie(F, d):
    """1 where d > 0, 0 where d < 0 and 1/2 at a tie, as PyTorch's maximum/minimum: min(x, x) is x,
    and its two partials must add up to 1."""
    return 0.5 * (1.0 + F.sign(d))


_prim("min", 2, lambda xp, x, y: xp.minimum(x, y),
      (lambda F, a, x, y: _tie(F, y - x), lambda F, a, x, y: _tie(F, x - y)),
      sympy.Min, kink=lambda xp, x, y: x == y, holomorphic=False, sample=((-2.0, 2.0), (-2.0, 2.0)),
      doc="min(a, b, ...): two or more arguments")
_prim("max", 2, lambda xp, x, y: xp.maximum(x, y),
      (lambda F, a, x, y: _tie(F, x - y), lambda F, a, x, y: _tie(F, y - x)),
      sympy.Max, kink=lambda xp, x, y: x == y, holomorphic=False, sample=((-2.0, 2.0), (-2.0, 2.0)),
      doc="max(a, b, ...): two or more arguments")
_prim("hypot", 2, lambda xp, x, y: xp.hypot(x, y), (lambda F, a, x, y: x / a, lambda F, a, x, y: y / a),
      lambda x, y: sympy.sqrt(x * x + y * y), kink=lambda xp, x, y: (x == 0) & (y == 0),
      holomorphic=False, sample=((-2.0, 2.0), (0.5, 2.0)), doc="sqrt(x**2 + y**2) without overflow")
# step is not in the language: it is what the partials of relu, min and max are made of.
_prim("step", 1, lambda xp, x: (x > 0).astype(x.dtype) if hasattr(x, "astype") else float(x > 0),
      lambda F, a, x: 0.0, sympy.Heaviside, holomorphic=False, public=False,
      doc="1 where x > 0, else 0")

# --- special functions ------------------------------------------------------------------------------
_prim("erf", 1, _erf, lambda F, a, x: _TWO_OVER_SQRT_PI * F.exp(-(x * x)), sympy.erf, holomorphic=False)
_prim("erfc", 1, _erfc, lambda F, a, x: -_TWO_OVER_SQRT_PI * F.exp(-(x * x)), sympy.erfc,
      holomorphic=False)
# sigmoid(x) * sigmoid(-x), not a * (1 - a): the latter is 0 in float64 from x = 37 on
_prim("sigmoid", 1, _sigmoid, lambda F, a, x: a * F.sigmoid(-x), lambda x: 1 / (1 + sympy.exp(-x)),
      sample=((-4.0, 4.0),), doc="1 / (1 + exp(-x))")
_prim("softplus", 1, _softplus, lambda F, a, x: F.sigmoid(x), softplus,
      sample=((-4.0, 4.0),), doc="log(1 + exp(x))")


# The elementwise ufunc behind each value, with constant trailing arguments, so that the compiled batch
# path can write into preallocated buffers (``ufunc(*args, out=buf)``); numpy and CuPy share the names.
# The others (sigmoid, softplus, erf, erfc) are evaluated through ``value`` and copied.
_UFUNCS = {
    "add": ("add",), "sub": ("subtract",), "mul": ("multiply",), "div": ("divide",), "neg": ("negative",),
    "pow": ("power",), "sin": ("sin",), "cos": ("cos",), "tan": ("tan",), "asin": ("arcsin",),
    "acos": ("arccos",), "atan": ("arctan",), "atan2": ("arctan2",), "sinh": ("sinh",), "cosh": ("cosh",),
    "tanh": ("tanh",), "asinh": ("arcsinh",), "acosh": ("arccosh",), "atanh": ("arctanh",), "exp": ("exp",),
    "expm1": ("expm1",), "log": ("log",), "log2": ("log2",), "log10": ("log10",), "log1p": ("log1p",),
    "sqrt": ("sqrt",), "cbrt": ("cbrt",), "abs": ("absolute",), "sign": ("sign",), "relu": ("maximum", 0.0),
    "min": ("minimum",), "max": ("maximum",), "hypot": ("hypot",), "step": ("heaviside", 0.0),
}
for _name, _ufunc in _UFUNCS.items():
    PRIMITIVES[_name] = replace(PRIMITIVES[_name], ufunc=_ufunc)

# The CUDA C expression behind each value, for the fused GPU kernel (gradcli/batch/cuda.py). "{k}" is
# argument k: always an atom there (a local, an input or a cast constant), so the templates parenthesise
# only themselves. They hold for float and double alike: the math functions are CUDA's overloads, and
# every literal is a cast to the kernel's element type T, so a float kernel never computes in double.
# Each mirrors the numpy ``value`` above, down to NaN and infinities: C's fmax/fmin drop a NaN where
# numpy.maximum/minimum keep it, and copysign(1, nan) is +-1 where numpy.sign(nan) is nan, so those are
# ternaries written as numpy's own loops are; sigmoid and softplus are _sigmoid and _softplus
# (logaddexp) operation for operation.
_CUDA = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})", "neg": "(-{0})",
    "pow": "pow({0}, {1})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})", "asin": "asin({0})",
    "acos": "acos({0})", "atan": "atan({0})", "atan2": "atan2({0}, {1})", "sinh": "sinh({0})",
    "cosh": "cosh({0})", "tanh": "tanh({0})", "asinh": "asinh({0})", "acosh": "acosh({0})",
    "atanh": "atanh({0})", "exp": "exp({0})", "expm1": "expm1({0})", "log": "log({0})", "log2": "log2({0})",
    "log10": "log10({0})", "log1p": "log1p({0})", "sqrt": "sqrt({0})", "cbrt": "cbrt({0})",
    "abs": "fabs({0})",
    "sign": "({0} > T(0) ? T(1) : ({0} < T(0) ? T(-1) : ({0} == T(0) ? T(0) : {0})))",
    "relu": "(({0} > T(0) || isnan({0})) ? {0} : T(0))",
    "min": "(({0} < {1} || isnan({0})) ? {0} : {1})",
    "max": "(({0} > {1} || isnan({0})) ? {0} : {1})",
    "hypot": "hypot({0}, {1})",
    "step": "({0} > T(0) ? T(1) : T(0))",
    "erf": "erf({0})", "erfc": "erfc({0})",
    "sigmoid": "({0} >= T(0) ? T(1) / (T(1) + exp(-fabs({0}))) : exp(-fabs({0})) / (T(1) + exp(-fabs({0}))))",
    "softplus": "(({0} > T(0) ? {0} : T(0)) + log1p(exp(-fabs({0}))))",
}
for _name, _template in _CUDA.items():
    PRIMITIVES[_name] = replace(PRIMITIVES[_name], cuda=_template)

# Where each primitive breaks (see Primitive.switch): poles and jumps break the function, kinks only
# its derivative.
_SWITCHES = {
    "div": ("pole", lambda xp, x, y: y),
    "pow": ("pole", lambda xp, x, y: xp.where(y < 0, x, xp.nan)),  # x**-2 at 0
    "tan": ("pole", lambda xp, x: xp.cos(x)),
    "sign": ("jump", lambda xp, x: x),
    "step": ("jump", lambda xp, x: x),
    "atan2": ("jump", lambda xp, y, x: xp.where(x < 0, y, xp.nan)),  # the branch cut along x < 0
    "abs": ("kink", lambda xp, x: x),
    "relu": ("kink", lambda xp, x: x),
    "min": ("kink", lambda xp, x, y: x - y),
    "max": ("kink", lambda xp, x, y: x - y),
    "cbrt": ("kink", lambda xp, x: x),  # continuous, with an infinite derivative at 0
    "hypot": ("kink", lambda xp, x, y: xp.where(abs(x) >= abs(y), x, y)),  # the cone's tip at (0, 0)
}
for _name, (_kind, _switch) in _SWITCHES.items():
    PRIMITIVES[_name] = replace(PRIMITIVES[_name], switch=_switch, switch_kind=_kind)

#: Names the parser accepts as functions, besides the primitives: (target, arity rule).
ALIASES = {"ln": "log"}
#: Functions of the language that are not single primitives: handled by the parser.
SUGAR = {
    "log": "log(x) natural log, log(x, b) log base b",
    "min": "two or more arguments",
    "max": "two or more arguments",
}

FUNCTION_NAMES: tuple[str, ...] = tuple(sorted({n for n, p in PRIMITIVES.items() if p.public} | set(ALIASES)))
CONSTANTS = {"pi": math.pi, "e": math.e}


def sympy_constant(name: str):
    return {"pi": sympy.pi, "e": sympy.E}[name]
