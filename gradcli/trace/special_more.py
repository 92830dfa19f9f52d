"""More of scipy.special for :mod:`gradcli.trace.special`: hypergeometric, the incomplete gamma and beta
functions and their inverses, Box-Cox, entropies, Owen's T, Pochhammer, scaled and K Bessel functions,
log-gamma, Dawson, the exponential, sine/cosine, Fresnel and elliptic integrals, the dilogarithm, zeta.

Each partial is a closed form in scipy's own functions (DLMF numbers in the comments) where one exists.
The parameters with none (hyp2f1's a, b, c, hyp1f1's a, b, the incomplete gammas' a, betainc's a, b,
zeta's x) are differentiated by mpmath at 30 digits, element by element (:func:`mp_partial`,
:func:`_complement_partial`). Where a closed form
cannot be evaluated as written (0 * inf at a pole, cancellation near a removable singularity) the limit
or a series takes over.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, value_of
from gradcli.trace.linear import QUIET
from gradcli.trace.rules import pointwise

_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_1_2 = math.sqrt(0.5)
_SQRT_2PI = math.sqrt(2 * math.pi)
#: beyond this many elements (about a millisecond each) a partial by mpmath would outlast a check's time
#: limit: the call is refused and the check falls back to numerics
MP_MAX_ELEMENTS = 4096


def fixed(what):
    """The partial in a parameter that is held fixed (an integer order, or no closed form): refused."""
    def partial(a, *args):
        raise NotTraceable(f"traced {what}: only the derivative in x is implemented")

    return partial


def _mp_elementwise(one, *args):
    """``one(*mpfs)`` at 30 digits over numpy's broadcast of ``args``, to float64; NaN where mpmath
    finds no real value (a pole, a complex result)."""
    import mpmath  # sympy's dependency, so always there; loaded only when such a partial is needed

    def safe(*v):
        try:
            with mpmath.workdps(30):
                return float(one(*[mpmath.mpf(x) for x in v]))
        except (ValueError, ZeroDivisionError, TypeError, mpmath.libmp.NoConvergence):
            return math.nan

    flat = np.broadcast_arrays(*[np.asarray(a, float) for a in args])
    if not flat[0].size:
        return np.zeros(flat[0].shape)
    if flat[0].size > MP_MAX_ELEMENTS:
        raise NotTraceable(f"{flat[0].size} elements for mpmath's partial, at most {MP_MAX_ELEMENTS}")
    with np.errstate(**QUIET):
        return np.vectorize(safe, otypes=[float])(*flat)


def mp_partial(mpfunc, k):
    """d/d args[k] of ``mpfunc(*args)`` by mpmath.diff (differences at raised precision, so the 30
    digits hold 15 after the cancellation), element by element: about a millisecond an element, which
    a check's reference, computed once per check on model-sized arrays, can afford; a series of our own
    would need its own continuation past each one's radius (hyp2f1 beyond |z| = 1), which mpmath has."""
    import mpmath

    def one(*v):
        return mpmath.diff(lambda t: mpfunc(*v[:k], t, *v[k + 1:]), v[k])

    def partial(ans, *args):
        return np.where(np.isfinite(ans), _mp_elementwise(one, *args), np.nan)

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


def _below_cut(partial):
    def checked(ans, a, b, c, z):
        if np.any(np.asarray(z) >= 1):
            raise NotTraceable("z >= 1: the branch cut")
        return partial(ans, a, b, c, z)

    return checked


def _hyp2f1_partials(sc):
    import mpmath

    # DLMF 15.5.1 in z; a, b and c have no closed form
    dz = _below_cut(lambda ans, a, b, c, z: a * b / c * sc.hyp2f1(a + 1, b + 1, c + 1, z))
    return tuple(_below_cut(mp_partial(mpmath.hyp2f1, k)) for k in range(3)) + (dz,)


def _hyp1f1_partials(sc):
    import mpmath

    # DLMF 13.3.15: d/dx M(a, b, x) = a / b M(a + 1, b + 1, x); a and b have no closed form
    return (mp_partial(mpmath.hyp1f1, 0), mp_partial(mpmath.hyp1f1, 1),
            lambda ans, a, b, x: a / b * sc.hyp1f1(a + 1, b + 1, x))


def _complement_partial(lower, upper, k, domain, negate=False):
    """d/d args[k] of a regularized function ``lower`` (``-`` that for ``negate``), by mpmath: of the
    smaller of it and its complement ``upper`` = 1 - lower, so that a derivative far below the value's
    size (P near 1 at large x) keeps its digits; NaN outside ``domain(*args)``."""
    import mpmath

    def one(*v):
        low = lower(*v) <= 0.5
        f = lower if low else upper
        d = mpmath.diff(lambda t: f(*v[:k], t, *v[k + 1:]), v[k])
        return -d if low == negate else d

    def partial(ans, *args):
        return np.where(np.isfinite(ans) & domain(*args), _mp_elementwise(one, *args), np.nan)

    return partial


def _gammainc_da(upper):
    """d/da of P(a, x) (Q for ``upper``)."""
    import mpmath

    return _complement_partial(lambda s, x: mpmath.gammainc(s, 0, x, regularized=True),
                               lambda s, x: mpmath.gammainc(s, x, mpmath.inf, regularized=True), 0,
                               lambda s, x: s > 0, upper)


def _betainc_partials(sc):
    """I_x(a, b) in a and b by mpmath (no closed form), in x DLMF 8.17.1's integrand."""
    import mpmath

    def lower(p, q, x):
        return mpmath.betainc(p, q, 0, x, regularized=True)

    def upper(p, q, x):
        return mpmath.betainc(p, q, x, 1, regularized=True)

    def domain(p, q, x):
        return (p > 0) & (q > 0) & (x >= 0) & (x <= 1)

    return (_complement_partial(lower, upper, 0, domain), _complement_partial(lower, upper, 1, domain),
            lambda a, p, q, x: np.exp(sc.xlogy(p - 1, x) + sc.xlog1py(q - 1, -x) - sc.betaln(p, q)))


def _gammaincinv_da(sc):
    da = _gammainc_da(False)

    def partial(ans, s, y):
        return -da(ans, s, ans) / _gammainc_dx(1, sc)(None, s, ans)

    return partial


def _gammainc_dx(sign, sc):
    return lambda a, s, x: sign * np.exp(sc.xlogy(s - 1, x) - x - sc.gammaln(s))


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
    return {
        sc.hyp2f1: (_hyp2f1_partials(sc), False),
        sc.hyp1f1: (_hyp1f1_partials(sc), False),
        sc.gammainc: ((_gammainc_da(False), _gammainc_dx(1, sc)), False),
        sc.gammaincc: ((_gammainc_da(True), _gammainc_dx(-1, sc)), False),
        sc.betainc: (_betainc_partials(sc), False),
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
        **_integrals_and_inverses(sc),
    }


def _unless0(m):
    return np.where(m == 0, 1.0, m)


def _ellipk_partial(sc):
    def partial(a, m):  # DLMF 19.4.1: (E - (1 - m) K) / (2 m (1 - m)); at m = 0 the limit pi / 8
        return np.where(m == 0, math.pi / 8, (sc.ellipe(m) - (1 - m) * a) / (2 * _unless0(m) * (1 - m)))

    return partial


def _integrals_and_inverses(sc):
    """Exponential and elliptic integrals, dilogarithm, K Bessel functions, entropy, and the inverses of
    the regularized incomplete functions: 1 / f' at the answer."""
    order, shape = fixed("order"), fixed("shape parameter")
    return {
        sc.entr: ((lambda a, x: -(np.log(x) + 1),), False),
        sc.exp1: ((lambda a, x: -np.exp(-x) / x,), False),  # DLMF 6.2.1
        sc.expi: ((lambda a, x: np.exp(x) / x,), False),
        # DLMF 8.19.13: E_n' = -E_(n-1), and E_0 = exp(-x) / x
        sc.expn: ((order, lambda a, n, x: np.where(n >= 1, -sc.expn(np.maximum(n - 1, 0), x),
                                                   -np.exp(-x) * (x + 1) / (x * x))), False),
        # scipy's spence(z) = int_1^z log(t) / (1 - t) dt: its slope log(z) / (1 - z), -1 at z = 1
        sc.spence: ((lambda a, z: np.where(z == 1, -1.0, np.log(z) / np.where(z == 1, 0.5, 1 - z)),), False),
        # DLMF 19.4.1; at m = 0 the limits pi / 8 and -pi / 8 (E' = (E - K) / 2m)
        sc.ellipk: ((_ellipk_partial(sc),), False),
        sc.ellipe: ((lambda a, m: np.where(m == 0, -math.pi / 8, (a - sc.ellipk(m)) / (2 * _unless0(m))),), False),
        # DLMF 10.29.5 (K'_v = -(K_(v-1) + K_(v+1)) / 2), the order constant
        sc.k0: ((lambda a, x: -sc.k1(x),), False),
        sc.k1: ((lambda a, x: -(sc.k0(x) + sc.kv(2, x)) / 2,), False),
        sc.kv: ((order, lambda a, v, x: -(sc.kv(v - 1, x) + sc.kv(v + 1, x)) / 2), False),
        sc.kn: ((order, lambda a, n, x: -(sc.kv(n - 1, x) + sc.kv(n + 1, x)) / 2), False),
        sc.yv: ((order, lambda a, v, x: (sc.yv(v - 1, x) - sc.yv(v + 1, x)) / 2), False),
        # ndtri(exp(y)): exp(y) / phi(ans), as one exponent so that neither factor under- or overflows
        sc.ndtri_exp: ((lambda a, y: np.exp(y + 0.5 * a * a) * _SQRT_2PI,), False),
        # x with P(a, x) = y (Q for gammainccinv): dx/dy = 1 / P_x (-1 / P_x), dx/da = -P_a / P_x for both
        sc.gammaincinv: ((_gammaincinv_da(sc), lambda ans, s, y: 1 / _gammainc_dx(1, sc)(None, s, ans)), False),
        sc.gammainccinv: ((_gammaincinv_da(sc), lambda ans, s, y: -1 / _gammainc_dx(1, sc)(None, s, ans)), False),
        sc.betaincinv: ((shape, shape, lambda ans, p, q, y: np.exp(
            sc.betaln(p, q) - sc.xlogy(p - 1, ans) - sc.xlog1py(q - 1, -ans))), False),
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
    """d/ds zeta(s, q), which scipy lacks and which has no closed form: mpmath's own derivative."""
    import mpmath

    return _mp_elementwise(lambda s1, q1: mpmath.zeta(s1, q1, 1), s, q)


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
