"""numpy functions differentiated as compositions of routed numpy calls on their Traced arguments.

Each rule first calls numpy itself on the plain values (its checks, its warnings, its exact value), then
builds the same function from calls that have rules (sort, gathers, where, sum, max, cumsum, cumprod,
arithmetic) and makes the composition hold numpy's value (``linear.with_value``): the derivative is the
composition's, the value numpy's. Where a derivative does not exist the composition's conventions hold:
sorted ties share their tangents equally (``along_axis.sort_rule``), so a median or quantile at tied
values takes the mean of the tied inputs' tangents, as np.max does at its ties.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, unwrap, value_of
from gradcli.trace.linear import axes_of, with_value
from gradcli.trace.rules import Elementwise


def _refuse(**given):
    bad = [k for k, v in given.items() if v is not None and v is not np._NoValue and v is not False]
    if bad:
        raise NotTraceable(", ".join(sorted(bad)) + "=")


def _real(*xs):
    for x in xs:
        if isinstance(x, Traced) and np.iscomplexobj(x._value):
            raise NotTraceable("complex input")


def _kd(keepdims):
    return bool(keepdims) if keepdims is not np._NoValue else False


# --- means and spreads --------------------------------------------------------------------------------
def _weighted(a, axis, weights, keepdims):
    """(average, sum of weights), both traced where their inputs are, in numpy's broadcasting of weights."""
    if weights is None:
        mean = np.mean(a, axis=axis, keepdims=keepdims)
        return mean, None
    w = weights
    if np.shape(value_of(w)) != np.shape(value_of(a)):  # weights along ``axis``: numpy's own reshaping
        order = (axis,) if np.isscalar(axis) else tuple(axis)
        axes = [ax % np.ndim(value_of(a)) for ax in order]
        w = np.transpose(w, np.argsort(axes))
        w = np.reshape(w, [n if i in axes else 1 for i, n in enumerate(np.shape(value_of(a)))])
        w = np.broadcast_to(w, np.shape(value_of(a)))
    scl = np.sum(w, axis=axis, keepdims=keepdims)
    return np.sum(a * w, axis=axis, keepdims=keepdims) / scl, scl


def average_rule(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    _real(a, weights)
    value = np.average(*unwrap((a, axis, weights, returned)), keepdims=keepdims)
    avg, scl = _weighted(a, axis, weights, _kd(keepdims))
    if not returned:
        return with_value(avg, value)
    avg_value, scl_value = value
    if scl is None or not isinstance(scl, Traced):
        return with_value(avg, avg_value), scl_value
    if scl.shape != np.shape(scl_value):
        scl = np.broadcast_to(scl, np.shape(scl_value))
    return with_value(avg, avg_value), with_value(scl, scl_value)


def ptp_rule(a, axis=None, out=None, keepdims=np._NoValue):
    _refuse(out=out)
    value = np.ptp(value_of(a), axis=axis, keepdims=keepdims)
    kd = _kd(keepdims)
    return with_value(np.max(a, axis=axis, keepdims=kd) - np.min(a, axis=axis, keepdims=kd), value)


def _nan_filled(a, fill):
    """``a`` with its NaNs replaced by the constant ``fill`` (a NaN entry gets no derivative)."""
    if not isinstance(a, Traced):
        raise NotTraceable("traced non-data argument")
    _real(a)
    if a.dtype.kind != "f":  # integers hold no NaN
        return a
    return np.where(np.isnan(a._value), np.asarray(fill, a.dtype), a)


def nan_extremum(func, base, fill):
    def rule(a, axis=None, out=None, keepdims=np._NoValue, initial=np._NoValue, where=np._NoValue):
        _refuse(out=out, initial=initial, where=where)
        value = func(value_of(a), axis=axis, keepdims=keepdims)  # numpy's all-NaN warning
        if np.any(np.isnan(value)):
            raise NotTraceable("an all-NaN slice")
        return with_value(base(_nan_filled(a, fill), axis=axis, keepdims=_kd(keepdims)), value)

    return rule


def nanprod_rule(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, initial=np._NoValue,
                 where=np._NoValue):
    _refuse(out=out, initial=initial, where=where)
    value = np.nanprod(value_of(a), axis=axis, dtype=dtype, keepdims=keepdims)
    return with_value(np.prod(_nan_filled(a, 1), axis=axis, dtype=dtype, keepdims=_kd(keepdims)), value)


def nan_accumulate(func, base, fill):
    def rule(a, axis=None, dtype=None, out=None):
        _refuse(out=out)
        value = func(value_of(a), axis=axis, dtype=dtype)
        return with_value(base(_nan_filled(a, fill), axis=axis, dtype=dtype), value)

    return rule


def nan_moment(func, root):
    """nanvar (nanstd: its square root) over the non-NaN entries, as numpy computes it."""

    def rule(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *, where=np._NoValue,
             mean=np._NoValue, correction=np._NoValue):
        _refuse(out=out, where=where, mean=mean, dtype=dtype)
        ddof = ddof if correction is np._NoValue else correction
        value = func(value_of(a), axis=axis, ddof=ddof, keepdims=keepdims)  # numpy's warnings
        kept = _nan_filled(a, 0)
        keep = ~np.isnan(a._value)
        count = np.sum(keep, axis=axis, keepdims=True)
        if np.any(count - ddof <= 0):
            raise NotTraceable("no degrees of freedom left in a slice")
        dev = np.where(keep, kept - np.sum(kept, axis=axis, keepdims=True) / count, np.zeros((), a.dtype))
        kd = _kd(keepdims)
        kept_count = np.sum(keep, axis=axis, keepdims=kd)
        var = np.sum(dev * dev, axis=axis, keepdims=kd) / (kept_count - ddof)
        if not root:
            return with_value(var, value)
        # a slice of one entry has std identically 0: sqrt's infinite slope there would make 0 * inf
        one, zero = kept_count == 1, np.zeros((), a.dtype)
        return with_value(np.where(one, zero, np.sqrt(np.where(one, np.ones((), a.dtype), var))), value)

    return rule


# --- order statistics ---------------------------------------------------------------------------------
_GAMMA = {"linear": lambda g: g, "lower": np.zeros_like, "higher": np.ceil}


def _quantile(a, q, axis, keepdims, method, value):
    """The quantiles ``q`` (plain, in [0, 1]) of ``a`` by sorting: each a mix of two neighbouring sorted
    elements, (1 - gamma) * lo + gamma * hi, numpy's interpolation at its virtual index q * (n - 1)."""
    if not isinstance(a, Traced) or isinstance(q, Traced):
        raise NotTraceable("traced q")
    _real(a)
    if method not in _GAMMA:
        raise NotTraceable(f"method={method!r}")
    if np.any(np.isnan(a._value)):
        raise NotTraceable("NaN input")
    axes = axes_of(axis, a.ndim)
    k = len(axes)
    moved = np.moveaxis(a, axes, range(k)) if axes else a
    rest = moved.shape[k:]
    n = math.prod(moved.shape[:k])
    if n == 0:
        raise NotTraceable("an empty slice")
    s = np.sort(np.reshape(moved, (n,) + rest), axis=0)
    q = np.asarray(q, float)
    index = q * (n - 1)
    lo = np.floor(index).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    gamma = _GAMMA[method](index - lo).reshape(q.shape + (1,) * len(rest))
    low = s[lo]
    res = low + gamma.astype(a.dtype) * (s[hi] - low)
    if keepdims:
        res = np.reshape(res, q.shape + tuple(1 if i in axes else m for i, m in enumerate(a.shape)))
    return with_value(res, value)


def quantile_rule(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None, interpolation=None):
    _refuse(out=out, weights=weights, interpolation=interpolation)
    # never overwrite_input: the tape keeps the array's value
    value = np.quantile(value_of(a), value_of(q), axis=axis, method=method, keepdims=keepdims)
    return _quantile(a, q, axis, keepdims, method, value)


def percentile_rule(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                    weights=None, interpolation=None):
    _refuse(out=out, weights=weights, interpolation=interpolation)
    value = np.percentile(value_of(a), value_of(q), axis=axis, method=method, keepdims=keepdims)
    return _quantile(a, q if isinstance(q, Traced) else np.true_divide(q, 100), axis, keepdims, method, value)


def median_rule(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _refuse(out=out)
    value = np.median(value_of(a), axis=axis, keepdims=keepdims)
    # an even count averages the two middle elements: the linear quantile at 1/2, gamma = 1/2
    return _quantile(a, 0.5, axis, keepdims, "linear", value)


# --- grids, polynomials, interpolation ----------------------------------------------------------------
def meshgrid_rule(*xi, copy=True, sparse=False, indexing="xy"):
    values = np.meshgrid(*unwrap(xi), copy=copy, sparse=sparse, indexing=indexing)
    ndim = len(xi)
    out = []
    for i, (x, value) in enumerate(zip(xi, values)):
        if not isinstance(x, Traced):
            out.append(value)
            continue
        j = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and ndim > 1 else i
        node = np.reshape(x, [-1 if k == j else 1 for k in range(ndim)])
        if not sparse:
            node = np.broadcast_to(node, value.shape)
        out.append(with_value(node, value))
    return tuple(out)


def polyval_rule(p, x):
    if isinstance(p, np.poly1d) or np.ndim(value_of(p)) != 1:
        raise NotTraceable("p not a 1-d array")
    value = np.polyval(*unwrap((p, x)))
    y = np.zeros_like(value_of(x))  # Horner's scheme, as numpy evaluates it
    for k in range(np.shape(value_of(p))[0]):
        y = y * x + p[k]
    return with_value(y, value)


def _interp_inside(x, xp, fp, value, left, right):
    """np.interp on strictly increasing ``xp`` (plain or traced): fp[j] + t * (fp[j + 1] - fp[j]), t =
    (x - xp[j]) / (xp[j + 1] - xp[j]), in the segment xp[j] <= x < xp[j + 1] that numpy evaluates (x =
    xp[-1] in the last one), left/right outside: so the knots' derivatives are this composition's too."""
    xv, xpv = np.asarray(value_of(x), float), np.asarray(value_of(xp), float)
    n = xpv.shape[0]
    j = np.clip(np.searchsorted(xpv, xv, side="right") - 1, 0, max(n - 2, 0))
    hi = np.minimum(j + 1, n - 1)
    width = np.where(hi > j, xp[hi] - xp[j], 1.0)
    t = (x - xp[j]) / width
    res = fp[j] + t * (fp[hi] - fp[j])
    res = np.where(xv < xpv[0], fp[0] if left is None else left, res)
    return with_value(np.where(xv > xpv[-1], fp[-1] if right is None else right, res), value)


def _float(v):
    return v.astype(np.float64) if isinstance(v, Traced) and v.dtype != np.float64 else v


def interp_rule(x, xp, fp, left=None, right=None, period=None):
    # the derivative in x is the slope of the segment numpy reads the value from: the one to the right
    # of an interior knot (a kink there, one-sided), the last one at xp[-1], zero outside [xp[0], xp[-1]]
    if isinstance(period, Traced):
        raise NotTraceable("traced period")
    if any(np.iscomplexobj(value_of(v)) for v in (x, xp, fp, left, right)):
        raise NotTraceable("complex input")
    value = np.interp(*unwrap((x, xp, fp, left, right)), period)
    xpv = np.asarray(value_of(xp), float)
    if xpv.ndim != 1 or np.any(np.diff(xpv) <= 0) and period is None:
        raise NotTraceable("xp not strictly increasing")
    if np.shape(value_of(fp)) != xpv.shape:
        raise NotTraceable("fp not the shape of xp")
    xp, fp = (_float(v) if isinstance(v, Traced) else np.asarray(v, float) for v in (xp, fp))
    if period is None:
        return _interp_inside(x, xp, fp, value, left, right)
    period = abs(period)
    x = np.remainder(x, period)  # derivative 1: numpy's reduction of x to one period
    order = np.argsort(xpv % period)
    xpm, fps = np.remainder(xp, period)[order], fp[order]
    if np.any(np.diff(xpv[order] % period) <= 0):
        raise NotTraceable("xp repeats modulo the period")
    xpp = np.concatenate([xpm[-1:] - period, xpm, xpm[:1] + period])
    return _interp_inside(x, xpp, np.concatenate([fps[-1:], fps, fps[:1]]), value, None, None)


def vander_rule(x, N=None, increasing=False):
    _real(x)
    value = np.vander(value_of(x), N, increasing)
    m = value.shape[1]
    if m <= 1:
        return value  # columns of ones: constant
    # powers as cumulative products (numpy's own way): exact derivatives at x = 0, unlike x ** 0
    powers = np.cumprod(np.broadcast_to(np.reshape(x, (-1, 1)), (value.shape[0], m - 1)), axis=1)
    v = np.concatenate([np.ones((value.shape[0], 1), value.dtype), powers], axis=1)
    return with_value(v if increasing else v[:, ::-1], value)


def ediff1d_rule(ary, to_end=None, to_begin=None):
    value = np.ediff1d(*unwrap((ary, to_end, to_begin)))  # numpy's casting checks first
    flat = np.ravel(ary)
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, np.ravel(to_begin))
    if to_end is not None:
        parts.append(np.ravel(to_end))
    parts = [p.astype(value.dtype) if np.asarray(value_of(p)).dtype != value.dtype else p for p in parts]
    return with_value(np.concatenate(parts), value)


def frexp_rule(x, **kwargs):
    if kwargs:
        raise NotTraceable(", ".join(sorted(kwargs)) + "=")
    _real(x)
    mantissa, exponent = np.frexp(x._value)
    # m = x * 2**-e with e piecewise constant: dm = 2**-e dx where e is constant; at its jumps (0 and the
    # exact powers of two) the same formula with numpy's exponent there, as np.floor takes 0 at integers
    w = np.ldexp(np.ones_like(mantissa), -exponent)
    return record(mantissa, [x], lambda ts: ts[0] * w, lambda g: [g * w]), exponent


def _ldexp_exponent(ans, x, e):
    raise NotTraceable("traced exponent")


# --- integrals, phases, covariance --------------------------------------------------------------------
_TRAPEZOID = getattr(np, "trapezoid", None) or getattr(np, "trapz")  # renamed in numpy 2.0


def trapezoid_rule(y, x=None, dx=1.0, axis=-1):
    _real(y, x)
    value = _TRAPEZOID(*unwrap((y, x, dx, axis)))
    nd = np.ndim(value_of(y))
    hi = (slice(None),) * (axis % nd) + (slice(1, None),)
    lo = (slice(None),) * (axis % nd) + (slice(None, -1),)
    d = dx
    if x is not None:
        d = np.diff(x, axis=axis) if np.ndim(value_of(x)) > 1 else np.diff(x)
        if np.ndim(value_of(x)) == 1:
            d = np.reshape(d, [-1 if i == axis % nd else 1 for i in range(nd)])
    return with_value(np.sum(d * (y[hi] + y[lo]) / 2.0, axis=axis), value)


def unwrap_rule(p, discont=None, axis=-1, *, period=2 * math.pi):
    if not isinstance(p, Traced) or any(isinstance(v, Traced) for v in (discont, period)):
        raise NotTraceable("traced discont or period")
    _real(p)
    value = np.unwrap(p._value, discont, axis, period=period)
    # p plus whole periods, a piecewise constant correction: derivative 1
    return with_value(p + (value - p._value), value)


def _rows(m, y, rowvar, dtype):
    """numpy's variables-by-observations matrix of cov, in the dtype of its result."""
    def cast(v):
        return v.astype(dtype) if isinstance(v, Traced) else np.asarray(v, dtype)

    X = np.atleast_2d(cast(m))
    if not rowvar and np.ndim(value_of(m)) != 1:
        X = np.transpose(X)
    if y is not None:
        Y = np.atleast_2d(cast(y))
        X = np.concatenate([X, np.transpose(Y) if not rowvar and np.shape(value_of(Y))[0] != 1 else Y], axis=0)
    return X


def cov_rule(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    if any(isinstance(v, Traced) for v in (fweights, aweights)):
        raise NotTraceable("traced weights")
    _real(m, y)
    value = np.cov(*unwrap((m, y, rowvar, bias, ddof, fweights, aweights)), dtype=dtype)
    X = _rows(m, y, rowvar, value.dtype)
    if np.shape(value_of(X))[0] == 0:
        return value
    ddof = (0 if bias else 1) if ddof is None else ddof
    weights = [np.asarray(v, float) for v in (fweights, aweights) if v is not None]
    w = math.prod(weights) if weights else None  # numpy's product of frequencies and weights
    n = np.shape(value_of(X))[1]
    if w is None:
        fact = n - ddof
    elif ddof == 0 or aweights is None:
        fact = w.sum() - ddof
    else:
        fact = w.sum() - ddof * np.sum(w * np.asarray(aweights, float)) / w.sum()
    if fact <= 0:
        raise NotTraceable("no degrees of freedom left")
    avg = np.mean(X, axis=1, keepdims=True) if w is None else np.sum(X * w, axis=1, keepdims=True) / w.sum()
    Xc = X - avg
    c = np.dot(Xc, np.transpose(Xc if w is None else Xc * w)) * (1.0 / fact)
    return with_value(np.squeeze(c), value)


def corrcoef_rule(x, y=None, rowvar=True, *args, dtype=None, **kwargs):
    value = np.corrcoef(*unwrap((x, y, rowvar) + args), dtype=dtype, **kwargs)  # numpy's warnings
    c = cov_rule(x, y, rowvar, dtype=dtype)
    if not isinstance(c, Traced):
        return value
    if c.ndim == 0:
        return with_value(c / c, value)
    d = np.diagonal(c)
    if np.any(value_of(d) == 0):
        raise NotTraceable("a constant variable: its correlations are NaN")
    s = np.sqrt(d)
    # numpy clips to [-1, 1] only to undo rounding past them: the unclipped composition's derivative
    return with_value(c / s[:, None] / s[None, :], value)


def routes(d) -> dict:
    """numpy callable -> Route, built with ``d(impl)`` (a differentiable route)."""
    table = {
        np.average: average_rule, np.ptp: ptp_rule, np.median: median_rule, np.quantile: quantile_rule,
        np.percentile: percentile_rule,
        np.nanmax: nan_extremum(np.nanmax, np.max, -np.inf), np.nanmin: nan_extremum(np.nanmin, np.min, np.inf),
        np.nanvar: nan_moment(np.nanvar, False), np.nanstd: nan_moment(np.nanstd, True), np.nanprod: nanprod_rule,
        np.nancumsum: nan_accumulate(np.nancumsum, np.cumsum, 0),
        np.nancumprod: nan_accumulate(np.nancumprod, np.cumprod, 1),
        np.meshgrid: meshgrid_rule, np.polyval: polyval_rule, np.interp: interp_rule, np.vander: vander_rule,
        np.ediff1d: ediff1d_rule, np.frexp: frexp_rule,
        np.ldexp: Elementwise(np.ldexp, (lambda ans, x, e: np.ldexp(np.ones_like(ans), e), _ldexp_exponent)),
        _TRAPEZOID: trapezoid_rule, np.unwrap: unwrap_rule, np.cov: cov_rule, np.corrcoef: corrcoef_rule,
    }
    if getattr(np, "trapz", _TRAPEZOID) is not _TRAPEZOID:  # both names: numpy 2.0 to 2.3
        table[np.trapz] = trapezoid_rule
    return {f: d(rule) for f, rule in table.items()}
