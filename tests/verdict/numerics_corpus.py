"""A corpus of gradients with exact references, for the numerical verdicts and ``benchmarks/numerics.py``.

Each case is an expression in the syntax both gradcli and sympy's Python parser read, and a point. The
reference is sympy's own derivative of sympy's own parse of the text (never gradcli's parser, rules or
symbolic module), evaluated to 50 digits at the exact binary value of each float coordinate.

Groups: ``stationary`` (the standard optimisation test functions at their minima: the gradient is 0, or
tiny where the minimum is only known to float64), ``cancellation`` (programs that lose digits in float64
while the derivative exists), ``smooth`` (ordinary functions at ordinary points), ``steep`` (steep and
oscillatory), ``pole`` (points near poles and domain edges).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

DIGITS = 50


@dataclass(frozen=True)
class Case:
    group: str
    expr: str
    point: tuple  # ((name, value), ...) in the order of the variables

    @property
    def at(self) -> dict:
        return dict(self.point)

    @property
    def label(self) -> str:
        return f"{self.expr} at " + ", ".join(f"{k}={v!r}" for k, v in self.point)


def _c(group, expr, **point):
    return Case(group, expr, tuple(point.items()))


def _rosenbrock(n):
    xs = [f"x{i}" for i in range(1, n + 1)]
    terms = [f"100*({xs[i + 1]} - {xs[i]}**2)**2 + (1 - {xs[i]})**2" for i in range(n - 1)]
    return " + ".join(terms), {x: 1.0 for x in xs}


_GOLDSTEIN_PRICE = ("(1 + (x + y + 1)**2*(19 - 14*x + 3*x**2 - 14*y + 6*x*y + 3*y**2))"
                    "*(30 + (2*x - 3*y)**2*(18 - 32*x + 12*x**2 + 48*y - 36*x*y + 27*y**2))")
_HIMMELBLAU = "(x**2 + y - 11)**2 + (x + y**2 - 7)**2"
_WOOD = ("100*(a**2 - b)**2 + (a - 1)**2 + (c - 1)**2 + 90*(c**2 - d)**2 + 10.1*((b - 1)**2 + (d - 1)**2)"
         " + 19.8*(b - 1)*(d - 1)")
_POWELL = "(a + 10*b)**2 + 5*(c - d)**2 + (b - 2*c)**4 + 10*(a - d)**4"
# a least-squares fit of y = a*t + b to data it fits exactly: the residual's gradient is 0 at (2, 1)
_LSQ = " + ".join(f"(a*{t} + b - {2 * t + 1})**2" for t in (0.5, 1.5, 2.5, 4.0))

STATIONARY = [
    _c("stationary", "(1 - x)**2 + 100*(y - x**2)**2", x=1.0, y=1.0),
    Case("stationary", _rosenbrock(10)[0], tuple(_rosenbrock(10)[1].items())),
    _c("stationary", _HIMMELBLAU, x=3.0, y=2.0),
    _c("stationary", _HIMMELBLAU, x=-2.805118086952745, y=3.131312518250573),
    _c("stationary", _HIMMELBLAU, x=-3.779310253377747, y=-3.283185991286170),
    _c("stationary", _HIMMELBLAU, x=3.584428340330492, y=-1.848126526964404),
    _c("stationary", "(1.5 - x + x*y)**2 + (2.25 - x + x*y**2)**2 + (2.625 - x + x*y**3)**2", x=3.0, y=0.5),
    _c("stationary", "(x + 2*y - 7)**2 + (2*x + y - 5)**2", x=1.0, y=3.0),
    _c("stationary", "0.26*(x**2 + y**2) - 0.48*x*y", x=0.0, y=0.0),
    _c("stationary", "2*x**2 - 1.05*x**4 + x**6/6 + x*y + y**2", x=0.0, y=0.0),
    _c("stationary", _GOLDSTEIN_PRICE, x=0.0, y=-1.0),
    _c("stationary", _WOOD, a=1.0, b=1.0, c=1.0, d=1.0),
    _c("stationary", _POWELL, a=0.0, b=0.0, c=0.0, d=0.0),
    _c("stationary", _LSQ, a=2.0, b=1.0),
    _c("stationary", "x**2 + y**2 + z**2", x=0.0, y=0.0, z=0.0),
    _c("stationary", "-cos(x)*cos(y)*exp(-((x - pi)**2 + (y - pi)**2))", x=3.141592653589793, y=3.141592653589793),
    _c("stationary", "sin(x + y) + (x - y)**2 - 1.5*x + 2.5*y + 1", x=-0.5471975511965976, y=-1.5471975511965976),
    _c("stationary", "x**4 - 2*x**2", x=1.0),
    _c("stationary", "cos(x)", x=0.0),
    _c("stationary", "exp(-(x - 2)**2)", x=2.0),
]

CANCELLATION = (
    [_c("cancellation", "(1 - cos(x))/x**2", x=h) for h in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)]
    + [_c("cancellation", "(exp(x) - 1)/x", x=h) for h in (1e-2, 1e-4, 1e-6, 1e-8, 1e-10)]
    + [_c("cancellation", "log(1 + x)/x", x=h) for h in (1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12)]
    + [_c("cancellation", "sqrt(x + 1) - sqrt(x)", x=h) for h in (1e2, 1e4, 1e6, 1e8, 1e10, 1e12)]
    + [_c("cancellation", "1 - cos(x)", x=h) for h in (1e-2, 1e-4, 1e-6, 1e-8)]
    + [_c("cancellation", "x - sin(x)", x=h) for h in (1e-1, 1e-2, 1e-3, 1e-4)]
    + [_c("cancellation", "(x + 1)**2 - x**2 - 2*x", x=h) for h in (1e3, 1e6)]
    + [_c("cancellation", "sin(pi)*x", x=2.0), _c("cancellation", "exp(x + 1e10 - 1e10)", x=0.5),
       _c("cancellation", "(sin(x) - x)/x**3", x=1e-2), _c("cancellation", "(tan(x) - sin(x))/x**3", x=1e-2)]
)

_SMOOTH_FUNCTIONS = ("exp(x)", "sin(x)", "cos(x)", "tan(x)", "log(x)", "sqrt(x)", "tanh(x)", "atan(x)",
                     "1/x", "x**3", "x**2.5", "exp(-x**2)", "sinh(x)", "cosh(x)", "asinh(x)", "erf(x)",
                     "log(1 + x**2)", "x*exp(x)", "sin(x)/x", "1/(1 + x**2)")
SMOOTH = (
    [_c("smooth", f, x=x) for f in _SMOOTH_FUNCTIONS for x in (0.3, 1.7, 12.5)]
    + [_c("smooth", "x**2*sin(y)", x=1.5, y=0.3), _c("smooth", "exp(x*y)*cos(z)", x=0.4, y=-1.2, z=2.0),
       _c("smooth", "log(x**2 + y**2)", x=3.0, y=-4.0), _c("smooth", "atan2(y, x)", x=1.0, y=2.0),
       _c("smooth", "hypot(x, y)", x=3.0, y=4.0), _c("smooth", "x**y", x=2.0, y=1.5),
       _c("smooth", "sqrt(x)*log(y)", x=1e6, y=1e-6), _c("smooth", "exp(x)", x=-30.0),
       _c("smooth", "exp(x)", x=50.0), _c("smooth", "sin(x)", x=1e6), _c("smooth", "log(x)", x=1e30),
       _c("smooth", "x**2", x=1e-150), _c("smooth", "1/x", x=1e150)]
)

STEEP = (
    [_c("steep", "exp(10*x)", x=x) for x in (-2.0, 0.5, 3.0)]
    + [_c("steep", "sin(100*x)", x=x) for x in (0.01, 0.7, 5.0)]
    + [_c("steep", "sin(1/x)", x=x) for x in (0.5, 0.1, 0.01)]
    + [_c("steep", "tanh(50*x)", x=x) for x in (0.0, 0.01, 0.05)]
    + [_c("steep", "cos(1000*x)", x=x) for x in (0.001, 1.3)]
    + [_c("steep", "exp(-x**2)*sin(30*x)", x=x) for x in (0.2, 1.1)]
    + [_c("steep", "x**20", x=x) for x in (0.9, 1.5)]
    + [_c("steep", "exp(exp(x))", x=x) for x in (1.0, 3.0)]
    + [_c("steep", "1/(1 + exp(-40*x))", x=x) for x in (0.02, 0.3)]
)

POLE = (
    [_c("pole", "tan(x)", x=x) for x in (1.5, 1.57, 1.5707, 1.570796)]
    + [_c("pole", "1/(x - 1)", x=x) for x in (1.1, 1.001, 1.000001)]
    + [_c("pole", "log(x)", x=x) for x in (1e-3, 1e-10, 1e-100)]
    + [_c("pole", "1/x", x=x) for x in (1e-5, 1e-50)]
    + [_c("pole", "sqrt(x)", x=x) for x in (1e-8, 1e-100)]
    + [_c("pole", "1/sin(x)", x=x) for x in (0.01, 3.14)]
    + [_c("pole", "atanh(x)", x=x) for x in (0.99, 0.999999)]
    + [_c("pole", "asin(x)", x=x) for x in (0.999, 0.99999999)]
    + [_c("pole", "log(x - 1)", x=1.0000001), _c("pole", "x/(x**2 - 4)", x=2.0001)]
)

CASES = STATIONARY + CANCELLATION + SMOOTH + STEEP + POLE


def _sympy():
    import sympy
    return sympy


def sympy_expr(case: Case):
    """sympy's own parse of the case's text (the corpus is ours: no user text reaches the parser)."""
    sympy = _sympy()
    names = {name: sympy.Symbol(name, real=True) for name, _ in case.point}
    names.update(pi=sympy.pi, e=sympy.E, atan2=sympy.atan2, hypot=lambda a, b: sympy.sqrt(a ** 2 + b ** 2),
                 erf=sympy.erf, log1p=lambda a: sympy.log(1 + a), expm1=lambda a: sympy.exp(a) - 1)
    from sympy.parsing.sympy_parser import rationalize, standard_transformations
    # decimals are the exact numbers written (10.1 is 101/10), as gradcli's own reference takes them
    expr = sympy.parse_expr(case.expr, local_dict=names, evaluate=False,
                            transformations=standard_transformations + (rationalize,))
    return expr, [names[n] for n, _ in case.point]


def exact_gradient(case: Case) -> list:
    """The exact gradient at the case's point as sympy Floats of :data:`DIGITS` digits."""
    sympy = _sympy()
    expr, symbols = sympy_expr(case)
    subs = {s: sympy.Rational(Fraction(v)) for s, (_, v) in zip(symbols, case.point)}
    return [sympy.N(sympy.diff(expr, s).subs(subs), DIGITS) for s in symbols]


def exact_hessian(case: Case) -> list:
    """The exact Hessian at the case's point, as for :func:`exact_gradient`."""
    sympy = _sympy()
    expr, symbols = sympy_expr(case)
    subs = {s: sympy.Rational(Fraction(v)) for s, (_, v) in zip(symbols, case.point)}
    return [[sympy.N(sympy.diff(expr, a, b).subs(subs), DIGITS) for b in symbols] for a in symbols]
