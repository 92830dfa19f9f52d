"""More of scipy.special for :mod:`gradcli.trace.special`: hypergeometric, Box-Cox, relative entropy,
Owen's T, Pochhammer, scaled Bessel, log-gamma, Dawson, the sine/cosine and Fresnel integrals, and zeta.

Each partial is a closed form in scipy's own functions (DLMF numbers in the comments), differentiated
in the data argument; a shape parameter with no closed-form partial (hyp2f1's a, b, c) is refused by
:func:`refuse` and the check falls back to numerics. Where a closed form cannot be evaluated as written
(0 * inf at a pole, cancellation near a removable singularity) the limit or a series takes over.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, value_of
from gradcli.trace.linear import QUIET
from gradcli.trace.rules import pointwise

_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_1_2 = math.sqrt(0.5)


def refuse(what):
    def partial(a, *args):
        raise NotTraceable(f"traced {what}: only the derivative in x is implemented")

    return partial


def _nonpositive_integer(v):
    return (v <= 0) & (v == np.floor(v))


def _boxcox_slope(t):
    """(t e^t - expm1(t)) / t^2, the lambda-derivative of Box-Cox over log(x)^2 at t = lambda log x:
    its Taylor series sum_{m>=2} (m-1) t^(m-2) / m! near 0, where the closed form cancels."""
    small = np.abs(t) < 0.25
    ts = np.where(small, t, 0.0)
    series = sum((m - 1) / math.factorial(m) * ts ** (m - 2) for m in range(2, 16))
    td = np.where(small, 1.0, t)
    with np.errstate(**QUIET):
        direct = (td * np.exp(td) - np.expm1(td)) / (td * td)
    return np.where(small, series, direct)


def _boxcox_partials(log):
    """boxcox(x, l) = (x^l - 1) / l, log(x) at l = 0 (boxcox1p: log1p for log, 1 + x for x)."""
    def dx(a, x, lmbda):
        return np.exp((lmbda - 1) * log(x))

    def dl(a, x, lmbda):
        lx = log(x)
        # at x = 0 (log x = -inf) boxcox is -1/l for l > 0: its slope 1/l^2, where the form is inf * 0
        return np.where(np.isneginf(lx), 1 / (lmbda * lmbda), lx * lx * _boxcox_slope(lmbda * lx))

    return dx, dl


def _hyp2f1_dz(sc):
    def partial(ans, a, b, c, z):  # DLMF 15.5.1
        if np.any(np.asarray(z) >= 1):
            raise NotTraceable("z >= 1: the branch cut")
        return a * b / c * sc.hyp2f1(a + 1, b + 1, c + 1, z)

    return partial


def _poch_partials(sc):
    """poch(z, m) = gamma(z + m) / gamma(z): d/dz = poch (psi(z + m) - psi(z)), d/dm = poch psi(z + m)."""
    def poles(z, m):
        if np.any(_nonpositive_integer(z) | _nonpositive_integer(z + m)):
            raise NotTraceable("z or z + m at a pole of gamma")

    def dz(a, z, m):
        poles(z, m)
        return a * (sc.psi(z + m) - sc.psi(z))

    def dm(a, z, m):
        poles(z, m)
        return a * sc.psi(z + m)

    return dz, dm


def _i1e_partial(sc):
    def partial(a, x):  # I1' = I0 - I1 / x (DLMF 10.29.5), less |x|'s slope; 1/2 at 0
        safe = np.where(x == 0, 1.0, x)
        return np.where(x == 0, 0.5, sc.i0e(x) - a / safe - np.sign(x) * a)

    return partial


def ufunc_partials(sc) -> dict:
    """scipy ufunc -> (partials, holomorphic), as special.py's own table."""
    data = refuse("parameter")
    return {
        sc.hyp2f1: ((data, data, data, _hyp2f1_dz(sc)), False),
        # DLMF 13.3.15: d/dx M(a, b, x) = a / b M(a + 1, b + 1, x)
        sc.hyp1f1: ((data, data, lambda ans, a, b, x: a / b * sc.hyp1f1(a + 1, b + 1, x)), False),
        sc.boxcox: (_boxcox_partials(np.log), False),
        sc.boxcox1p: (_boxcox_partials(np.log1p), False),
        # x log(x/y) - x + y and x log(x/y): log(x) - log(y) does not overflow where x / y would
        sc.kl_div: ((lambda a, x, y: np.log(x) - np.log(y),
                     lambda a, x, y: np.where(x == 0, 1.0, 1 - x / np.where(x == 0, 1.0, y))), False),
        sc.rel_entr: ((lambda a, x, y: np.log(x) - np.log(y) + 1,
                       lambda a, x, y: np.where(x == 0, 0.0, -x / np.where(x == 0, 1.0, y))), False),
        # T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt
        sc.owens_t: ((lambda ans, h, a: -0.5 * _INV_SQRT_2PI * np.exp(-0.5 * h * h) * sc.erf(h * a * _SQRT_1_2),
                      lambda ans, h, a: np.exp(-0.5 * h * h * (1 + a * a)) / (2 * math.pi * (1 + a * a))), False),
        sc.poch: (_poch_partials(sc), False),
        # i0e = exp(-|x|) I0(x), I0' = I1: a kink at 0 (slopes -1 and 1), no derivative there
        sc.i0e: ((lambda a, x: np.where(x == 0, np.nan, sc.i1e(x) - np.sign(x) * a),), False),
        sc.i1e: ((_i1e_partial(sc),), False),
        sc.loggamma: ((lambda a, x: sc.psi(x),), True),
        sc.dawsn: ((lambda a, x: 1 - 2 * x * a,), True),  # DLMF 7.10: F' = 1 - 2 x F
    }


class TwoOutputs:
    """A ufunc of x with two outputs (sici, fresnel): a node per output, each with its partial."""

    def __init__(self, ufunc, partials):
        self.ufunc, self.partials = ufunc, partials

    def __call__(self, x, **kwargs):
        if kwargs or not isinstance(x, Traced):
            raise NotTraceable(", ".join(kwargs) + "=" if kwargs else "traced out=")
        v = value_of(x)
        if np.iscomplexobj(v):
            raise NotTraceable("complex input")
        outs = self.ufunc(v)
        with np.errstate(**QUIET):
            return tuple(pointwise(o, [x], [p(v)]) for o, p in zip(outs, self.partials))


def two_output_rules(sc) -> dict:
    return {
        # Si' = sin(x) / x (1 at 0); Ci' = cos(x) / x, also for x < 0, where scipy's Ci is Ci(|x|)
        sc.sici: TwoOutputs(sc.sici, (lambda x: np.sinc(x / math.pi), lambda x: np.cos(x) / x)),
        # S(z) = int_0^z sin(pi t^2 / 2) dt, C likewise with cos
        sc.fresnel: TwoOutputs(sc.fresnel, (lambda z: np.sin(0.5 * math.pi * z * z),
                                            lambda z: np.cos(0.5 * math.pi * z * z))),
    }


def _zeta_ds(s, q):
    """d/ds zeta(s, q), which scipy lacks: mpmath's, element by element, to float64."""
    import mpmath

    def one(s1, q1):
        with mpmath.workdps(30):
            return float(mpmath.zeta(s1, q1, 1))

    with np.errstate(**QUIET):
        return np.vectorize(one, otypes=[float])(s, q) if np.size(s) else np.zeros(np.shape(s))


def zeta_rule(original):
    """scipy.special.zeta(x, q=None): Hurwitz's zeta (Riemann's without q). d/dq = -x zeta(x + 1, q)
    (DLMF 25.11.17); d/dx by mpmath."""
    def rule(x, q=None, out=None):
        if out is not None:
            raise NotTraceable("out=")
        xv, qv = value_of(x), (1.0 if q is None else value_of(q))
        if np.iscomplexobj(xv) or np.iscomplexobj(qv):
            raise NotTraceable("complex input")
        value = np.asarray(original(xv, None if q is None else qv))
        parents, ps = [], []
        if isinstance(x, Traced):
            if np.any(xv == 1):
                raise NotTraceable("x = 1, the pole")
            parents.append(x)
            ps.append(np.where(np.isfinite(value), _zeta_ds(*np.broadcast_arrays(xv, qv)), np.nan))
        if isinstance(q, Traced):
            parents.append(q)
            with np.errstate(**QUIET):
                ps.append(-xv * original(xv + 1, qv))
        return pointwise(value, parents, ps)

    return rule
