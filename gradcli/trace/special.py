"""Differentiation rules for scipy: scipy.special's ufuncs and scipy's python-level functions.

scipy is optional, and the tracer never imports it first (scipy.stats alone takes a second to import):
its routes are built once something else has imported scipy, when the routing table is built or at the
start of the next trace, which is before the user's code can call it.

* scipy.special's ufuncs meet ``Traced.__array_ufunc__`` as numpy's do: :class:`Elementwise` rules
  from the partials below (expit, erf, erfc, expm1 and log1p take the primitive table's); stdtr
  and the Bessel functions in x alone, refusing a traced shape parameter or order (the incomplete
  gamma and beta functions are special_more's); gammasgn is piecewise constant (derivative zero, as np.sign);
* python-level functions (logsumexp, softmax, log_softmax, polygamma, ``scipy.stats.norm``'s logpdf,
  pdf, cdf and logcdf, ``multivariate_normal``'s logpdf and pdf) convert their arguments with
  np.asarray, which cuts the trace. While a trace runs (:func:`substituted`) they are replaced where
  they are looked up: in scipy.special, on the distributions' classes (so a frozen ``norm(loc, scale)``
  is covered), and at the names of the traced function's module bound to them (``from scipy.special
  import logsumexp``). The substitutes hand calls to the routing table; each rule returns scipy's own
  value and takes its derivative from the same function written as numpy calls on Traced values,
  differentiated by the existing rules. A reference held elsewhere (another module's from-import, a
  default argument, a frozen multivariate_normal) still reaches scipy, which converts: the cut is
  reported and the check falls back to numerics. :mod:`gradcli.trace.scipy_more` adds more
  distributions, multigammaln and scipy.linalg's and scipy.signal's functions by the same mechanism;
  :mod:`gradcli.trace.special_more` more ufuncs (hypergeometric, Box-Cox, entropies...) and zeta.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import sys
import types

import numpy as np

from gradcli.trace import special_more, substitution
from gradcli.trace.array import ROUTES, NotTraceable, Traced, dispatch, record, unwrap, value_of
from gradcli.trace.linear import axes_of, for_parent
from gradcli.trace.rules import Elementwise, table_partials
from gradcli.trace.scipy_more import composed, direct
from gradcli.trace.scipy_more import real_only as _real

_SQRT_PI_2 = math.sqrt(math.pi) / 2
_SQRT_2PI = math.sqrt(2 * math.pi)
_LOG_2PI = math.log(2 * math.pi)


# --- ufuncs -------------------------------------------------------------------------------------------
def _unless_x0(x, p):
    # xlogy(0, y) = xlog1py(0, y) = 0 for every y: no dependence on y where x = 0, even at y = 0
    return np.where(x == 0, np.zeros((), np.result_type(p)), p)


def _ufunc_partials(sc):
    """scipy ufunc -> (partials, holomorphic). ``partials[i](ans, *args)`` is d ans / d args[i].

    xlogy(x, y) is x * log(y), and 0 where x = 0 for every y (the limit for y > 0). Its partial in x is
    log(y): -inf at y = 0, rightly no finite number, as the value jumps from 0 at x = 0 to -inf for
    x > 0 (+inf for x < 0); a zero tangent in x still gives zero there. Its partial in y is x / y, and 0
    where x = 0, where the value does not depend on y, at y = 0 too (the 0 log 0 = 0 of a cross-entropy
    with a zero label). xlog1py likewise, with log1p(y) and x / (1 + y)."""
    psi, polygamma = sc.psi, sc.polygamma
    shape, order = special_more.fixed("shape parameter"), special_more.fixed("order")
    return {
        sc.expit: (table_partials("sigmoid"), False),
        sc.erf: (table_partials("erf"), True),
        sc.erfc: (table_partials("erfc"), True),
        sc.expm1: (table_partials("expm1"), True),
        sc.log1p: (table_partials("log1p"), True),
        sc.logit: ((lambda a, x: 1 / (x * (1 - x)),), False),
        sc.log_expit: ((lambda a, x: sc.expit(-x),), False),
        # inverse functions: 1 / f'(ans)
        sc.erfinv: ((lambda a, x: _SQRT_PI_2 * np.exp(a * a),), False),
        sc.erfcinv: ((lambda a, x: -_SQRT_PI_2 * np.exp(a * a),), False),
        sc.ndtri: ((lambda a, x: _SQRT_2PI * np.exp(0.5 * (a * a)),), False),
        sc.ndtr: ((lambda a, x: np.exp(-0.5 * (x * x)) / _SQRT_2PI,), True),
        # phi / Phi as exp(log phi - log_ndtr): neither factor underflows far in the lower tail
        sc.log_ndtr: ((lambda a, x: np.exp(-0.5 * (x * x) - a) / _SQRT_2PI,), True),
        sc.gamma: ((lambda a, x: a * psi(x),), True),
        # gammaln is log|gamma|: psi is its derivative on both sides of the poles
        sc.gammaln: ((lambda a, x: psi(x),), False),
        sc.psi: ((lambda a, x: polygamma(1, x),), False),  # polygamma has no complex form
        sc.betaln: ((lambda a, x, y: psi(x) - psi(x + y), lambda a, x, y: psi(y) - psi(x + y)), False),
        sc.xlogy: ((lambda a, x, y: np.log(y), lambda a, x, y: _unless_x0(x, x / y)), True),
        sc.xlog1py: ((lambda a, x, y: np.log1p(y), lambda a, x, y: _unless_x0(x, x / (1 + y))), True),
        sc.beta: ((lambda a, x, y: a * (psi(x) - psi(x + y)), lambda a, x, y: a * (psi(y) - psi(x + y))),
                  False),
        sc.rgamma: ((_rgamma_partial(sc),), False),
        sc.erfcx: ((lambda a, x: 2 * (x * a) - 2 / math.sqrt(math.pi),), False),
        sc.stdtr: ((shape, lambda a, df, t: np.exp(
            sc.gammaln((df + 1) / 2) - sc.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
            - (df + 1) / 2 * np.log1p(t * t / df))), False),
        # Bessel functions in x, the order constant (jn is jv)
        sc.j0: ((lambda a, x: -sc.j1(x),), False),
        sc.y0: ((lambda a, x: -sc.y1(x),), False),
        sc.j1: ((lambda a, x: (sc.j0(x) - sc.jv(2, x)) / 2,), False),
        sc.y1: ((lambda a, x: (sc.y0(x) - sc.yv(2, x)) / 2,), False),
        sc.jv: ((order, lambda a, n, x: (sc.jv(n - 1, x) - sc.jv(n + 1, x)) / 2), False),
        sc.yn: ((_order, lambda a, n, x: (sc.yv(n - 1, x) - sc.yv(n + 1, x)) / 2), False),
        sc.i0: ((lambda a, x: sc.i1(x),), False),
        sc.i1: ((lambda a, x: (sc.i0(x) + sc.iv(2, x)) / 2,), False),
        sc.iv: ((order, lambda a, n, x: (sc.iv(n - 1, x) + sc.iv(n + 1, x)) / 2), False),
        # ive = iv exp(-|x|): the same recurrence, less |x|'s slope; none at x = 0
        sc.ive: ((order, lambda a, n, x: np.where(
            (x == 0) & (a != 0), np.nan, (sc.ive(n - 1, x) + sc.ive(n + 1, x)) / 2 - np.sign(x) * a)), False),
    }


def _rgamma_partial(sc):
    """d/dx 1/gamma(x) = -psi(x) / gamma(x); at the poles of gamma, x = -n, where 1/gamma is 0, its
    slope is (-1)^n n!, which -psi * 0 would leave NaN."""
    def partial(a, x):
        pole = (x <= 0) & (x == np.floor(x))
        n = np.where(pole, -x, 0)
        return np.where(pole, np.where(n % 2 == 0, 1.0, -1.0) * sc.gamma(n + 1), -sc.psi(x) * a)

    return partial


def _order(a, n, x):
    raise NotTraceable("traced n: the order is an integer")


# --- python-level functions, as numpy calls on Traced values --------------------------------------------
def _shift(m):
    """A plain shift for exp: the maximum where it is finite, else 0. Any constant cancels exactly."""
    return np.where(np.isfinite(m), m, 0.0)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    _real(a, b)
    av, a = np.atleast_1d(value_of(a)), np.atleast_1d(a)
    kept = av
    if b is not None:
        av, bv = np.broadcast_arrays(av, np.atleast_1d(value_of(b)))
        kept = np.where(bv != 0, av, -np.inf)  # scipy's value drops the terms with b = 0
    axes = axes_of(axis, av.ndim)
    shift = _shift(np.max(kept, axis=axes, keepdims=True, initial=-np.inf))
    if b is not None and not isinstance(b, Traced):
        a = np.where(bv != 0, a, -np.inf)  # a constant zero term, whatever a is there
    elif b is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            if not np.all((bv != 0) | np.isfinite(np.exp(av - shift))):
                raise NotTraceable("b = 0 against a term that overflows: d/db is not finite")
    e = np.exp(a - shift)
    s = np.sum(e if b is None else b * e, axis=axes, keepdims=keepdims)
    if not return_sign and np.any(value_of(s) < 0):
        raise NotTraceable("b= makes a sum negative: scipy's value is nan")
    out = np.log(np.abs(s) if return_sign else s)
    return out + (shift if keepdims else np.squeeze(shift, axis=axes))


def softmax(x, axis=None):
    _real(x)
    e = np.exp(x - _shift(np.max(value_of(x), axis=axis, keepdims=True)))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=None):
    _real(x)
    t = x - _shift(np.max(value_of(x), axis=axis, keepdims=True))
    return t - np.log(np.sum(np.exp(t), axis=axis, keepdims=True))


def _norm(kind, sc):
    """scipy.stats.norm's ``kind`` (logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf) of x with loc and scale."""

    def compose(x, loc=0.0, scale=1.0, **kw):
        if kw:
            raise NotTraceable(", ".join(sorted(kw)) + "=")
        _real(x, loc, scale)
        if np.any(np.asarray(value_of(scale)) <= 0):
            raise NotTraceable("scale <= 0: scipy's value is nan")
        if kind in ("ppf", "isf"):  # x is the probability; isf(q) = ppf(1 - q) = -ndtri(q) exactly
            return loc + scale * (sc.ndtri(x) if kind == "ppf" else -sc.ndtri(x))
        z = (x - loc) / scale
        tails = {"cdf": sc.ndtr, "logcdf": sc.log_ndtr, "sf": lambda z: sc.ndtr(-z),
                 "logsf": lambda z: sc.log_ndtr(-z)}
        if kind in tails:
            return tails[kind](z)
        logpdf = -0.5 * (z * z) - np.log(scale) - 0.5 * _LOG_2PI
        return np.exp(logpdf) if kind == "pdf" else logpdf

    return compose


def _routed(*funcs):
    return all(getattr(ROUTES.get(f), "kind", None) == "differentiable" for f in funcs)


def _mvn(kind, st):
    """scipy.stats.multivariate_normal's ``kind`` (logpdf, pdf), shapes as scipy processes them."""

    def compose(x, mean=None, cov=1, allow_singular=False):
        if allow_singular:
            raise NotTraceable("allow_singular=True")
        if isinstance(cov, getattr(st, "Covariance", ())):  # scipy >= 1.10
            raise NotTraceable("a Covariance object")
        _real(x, mean, cov)
        cv = np.asarray(value_of(cov), dtype=float)
        dim = (1 if cv.ndim < 2 else cv.shape[0]) if mean is None else np.size(value_of(mean))
        mean = 0.0 if mean is None else np.reshape(mean, (dim,))
        if dim == 1:
            cov = np.reshape(cov, (1, 1))
        elif cv.ndim < 2:
            cov = np.diag(cov) if cv.ndim == 1 else cov * np.eye(dim)
        nx = np.ndim(value_of(x))
        if nx < 2:
            x = np.reshape(x, (1,) if nx == 0 else (-1, 1) if dim == 1 else (1, -1))
        dev = x - mean
        if isinstance(cov, Traced):
            if not _routed(np.linalg.slogdet, np.linalg.solve):
                raise NotTraceable("a traced cov needs np.linalg.slogdet and np.linalg.solve traced")
            sym = np.tril(cov) + np.swapaxes(np.tril(cov, -1), 0, 1)  # scipy reads the lower triangle
            flat = np.reshape(dev, (-1, dim))
            sol = np.swapaxes(np.linalg.solve(sym, np.swapaxes(flat, 0, 1)), 0, 1)
            maha = np.reshape(np.sum(flat * sol, axis=-1), np.shape(value_of(dev))[:-1])
            logdet = np.linalg.slogdet(sym)[1]
        else:
            s, u = np.linalg.eigh(np.asarray(cov, dtype=float))  # the lower triangle, as scipy's eigh
            if not np.min(s) > 0:
                raise NotTraceable("cov is singular")
            z = dev @ (u / np.sqrt(s))
            maha, logdet = np.sum(z * z, axis=-1), np.sum(np.log(s))
        out = np.squeeze(-0.5 * (dim * _LOG_2PI + logdet + maha))
        return np.exp(out) if kind == "pdf" else out

    return compose


def _mvn_entropy(mean=None, cov=1, allow_singular=False):
    """scipy.stats.multivariate_normal.entropy: (dim * log(2 pi e) + log det cov) / 2, in cov (the
    mean does not enter)."""
    if allow_singular:
        raise NotTraceable("allow_singular=True")
    _real(mean, cov)
    cv = np.asarray(value_of(cov), dtype=float)
    dim = (1 if cv.ndim < 2 else cv.shape[0]) if mean is None else np.size(value_of(mean))
    if cv.ndim < 2:
        logdet = np.sum(np.log(cov)) if cv.ndim == 1 else dim * np.log(cov)
    else:
        if not _routed(np.linalg.slogdet):
            raise NotTraceable("a traced cov needs np.linalg.slogdet traced")
        logdet = np.linalg.slogdet(np.tril(cov) + np.swapaxes(np.tril(cov, -1), 0, 1))[1]
    return 0.5 * (dim * (_LOG_2PI + 1.0) + logdet)


def _carry(res, value):
    """A node with scipy's ``value`` and the derivative of ``res`` (the same function, other rounding)."""
    value = np.asarray(value)
    if not isinstance(res, Traced):  # the composition met an untraceable call: already reported
        return value
    if res.shape != value.shape:
        raise NotTraceable(f"shape {res.shape} where scipy's is {value.shape}")
    src, dst = res.dtype, value.dtype
    return record(value, [res], lambda ts: np.asarray(ts[0]).astype(dst, copy=False),
                  lambda g: [np.asarray(for_parent(g, src)).astype(src, copy=False)])


def _with_scipy_value(original, compose):
    def rule(*args, **kwargs):
        value = original(*unwrap(args), **unwrap(kwargs))  # first: scipy's own errors, as untraced
        res = compose(*args, **kwargs)
        if isinstance(value, tuple):  # logsumexp's return_sign: the sign is piecewise constant
            return (_carry(res, value[0]),) + value[1:]
        return _carry(res, value)

    return rule


def _python_level(sc, st):
    """(owner, attribute, name in problems, rule factory of the original) of each python-level function."""
    def poly(f):  # d/dx polygamma(n, x) = polygamma(n + 1, x)
        return Elementwise(f, (_order, lambda a, n, x: f(n + 1, x)))

    def level(compose):
        return lambda f: _with_scipy_value(f, compose)

    groups = [(sc, "scipy.special", {"polygamma": poly, "logsumexp": level(logsumexp), "zeta": special_more.zeta_rule,
                                     "softmax": level(softmax), "log_softmax": level(log_softmax)}),
              (st.norm, "scipy.stats.norm",
               {k: level(_norm(k, sc)) for k in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf",
                                                 "isf")}),
              (st.multivariate_normal, "scipy.stats.multivariate_normal",
               {**{k: level(_mvn(k, st)) for k in ("logpdf", "pdf")}, "entropy": level(_mvn_entropy)})]
    groups += [(owner, prefix, {k: level(c) for k, c in attrs.items()})
               for owner, prefix, attrs in composed(sc, st)]
    groups += direct()
    return [(owner, attr, f"{prefix}.{attr}", factory)
            for owner, prefix, attrs in groups for attr, factory in attrs.items()]


# --- registration and substitution -------------------------------------------------------------------
class _Scipy:
    """What has been built for scipy."""

    def __init__(self):
        self.make = None  # routing's d(impl)
        self.loaded = False


_STATE = _Scipy()


def _wrapper(original, name):
    @functools.wraps(original)
    def call(*args, **kwargs):
        return dispatch(original, original, args, kwargs, name)

    return call


def _method(key, name):
    """The substitute on a distribution's class, so that the copy a frozen ``norm(loc, scale)`` keeps
    is routed too: every instance of the class routes as ``key``, the public instance's method."""
    func = key.__func__

    @functools.wraps(func)
    def call(self, *args, **kwargs):
        return dispatch(key, func.__get__(self), args, kwargs, name)

    return call


def _load() -> dict:
    """The routes for scipy, the first time it is found imported; {} before, after, or without it."""
    if _STATE.loaded or _STATE.make is None or "scipy" not in sys.modules:
        return {}
    try:
        import scipy.special as sc
        import scipy.stats as st
    except ImportError:
        return {}
    d = _STATE.make
    partials = {**_ufunc_partials(sc), **special_more.ufunc_partials(sc)}
    table = {u: d(Elementwise(u, p, p if holomorphic else None)) for u, (p, holomorphic) in partials.items()}
    table.update({u: d(rule) for u, rule in special_more.two_output_rules(sc).items()})
    # routing's constant route, made from d's (the only one routing hands over): piecewise constant
    table[sc.gammasgn] = dataclasses.replace(d(None), kind="constant")
    for owner, attr, name, factory in _python_level(sc, st):
        original = getattr(owner, attr)
        table[original] = d(factory(original))
        if isinstance(owner, types.ModuleType):
            substitution.add_site(owner, attr, _wrapper(original, name), rebind=True)
        else:  # on the class, so that the copy a frozen norm(loc, scale) keeps is routed too
            substitution.add_site(type(owner), attr, _method(original, name))
    _STATE.loaded = True
    return table


def routes(d) -> dict:
    """scipy callable -> Route, built with ``d(impl)``, once scipy is imported: until then {}, and the
    first trace after its import adds them (:mod:`gradcli.trace.substitution`)."""
    _STATE.make = d
    return _load()


substitution.on_start(lambda: ROUTES.update(_load()))
