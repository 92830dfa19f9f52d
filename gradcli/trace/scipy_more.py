"""Rules for scipy's other python-level functions: scipy.stats' t, beta, gamma, chi2, expon, laplace,
logistic, cauchy, uniform, gennorm, poisson, bernoulli, geom, binom, nbinom, betabinom and dirichlet, scipy.special.multigammaln, scipy.linalg's solve_triangular,
solve_banded, sqrtm, expm and solve_sylvester (the factorizations and general-matrix functions are
:mod:`gradcli.trace.scipy_linalg`'s), scipy.signal.convolve and
scipy.integrate.odeint (its rule is :mod:`gradcli.trace.integrate`'s).
:mod:`gradcli.trace.special` registers them with its own.

* :func:`composed` gives each function written as numpy calls on Traced values (special.py keeps
  scipy's value and takes the derivative from them). A distribution's parameters are differentiated
  wherever the composition is; a shape parameter inside a cdf (an incomplete gamma or beta, stdtr) is
  refused by that ufunc's rule. Outside a support the value is a constant (-inf, 0 or 1): no derivative.
* :func:`direct` gives rules with explicit jvp and vjp: sqrtm and solve_sylvester (Sylvester equations
  with the same coefficients, transposed for the vjp), expm (its Frechet derivative, whose adjoint is
  the Frechet derivative at the conjugate transpose) and signal.convolve (bilinear, as np.convolve).
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.trace.along_axis import convolution
from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.integrate import odeint_rule
from gradcli.trace.linear import for_parent
from gradcli.trace.scipy_linalg import direct_rules, general_rules, square

_LOG_2 = math.log(2)
_LOG_PI = math.log(math.pi)


def real_only(*xs):
    if any(np.iscomplexobj(value_of(x)) for x in xs if x is not None):
        raise NotTraceable("complex input")


def _plain(name, *xs):
    if any(isinstance(x, Traced) for x in xs):
        raise NotTraceable(f"traced {name}: it is discrete")


# --- scipy.stats --------------------------------------------------------------------------------------
def _standard(sc):
    """distribution -> (number of shape parameters, support of z, {kind: f(z, *shapes)}) for the
    standardised variable z = (x - loc) / scale; a missing logcdf is log(cdf)."""
    def t_logpdf(z, df):
        return (sc.gammaln((df + 1) / 2) - sc.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
                - (df + 1) / 2 * np.log1p(z * z / df))

    def laplace_cdf(z):
        e = 0.5 * np.exp(-np.abs(z))
        return np.where(value_of(z) < 0, e, 1 - e)

    def logistic_logpdf(z):
        m = np.abs(z)  # the density is symmetric: exp(-|z|) does not overflow
        return -m - 2 * np.log1p(np.exp(-m))

    def laplace_ppf(q):
        qv = value_of(q)
        return np.where(qv < 0.5, np.log(2 * np.where(qv < 0.5, q, 0.25)),
                        -np.log(2 * (1 - np.where(qv < 0.5, 0.75, q))))

    def gennorm_cdf(z, b):
        return 0.5 + 0.5 * np.sign(value_of(z)) * sc.gammainc(1 / b, np.abs(z) ** b)

    unit = lambda z: (value_of(z) >= 0) & (value_of(z) <= 1)  # noqa: E731
    positive = lambda z: value_of(z) >= 0  # noqa: E731
    # sf, ppf and isf are given where 1 - cdf would lose the tail or the inverse has a closed form
    return {
        "t": (1, None, {"logpdf": t_logpdf, "cdf": lambda z, df: sc.stdtr(df, z),
                        "sf": lambda z, df: sc.stdtr(df, -z)}),
        "beta": (2, unit, {"logpdf": lambda z, a, b: sc.xlogy(a - 1, z) + sc.xlog1py(b - 1, -z)
                           - sc.betaln(a, b), "cdf": lambda z, a, b: sc.betainc(a, b, z),
                           "sf": lambda z, a, b: sc.betainc(b, a, 1 - z),
                           "ppf": lambda q, a, b: sc.betaincinv(a, b, q)}),
        "gamma": (1, positive, {"logpdf": lambda z, a: sc.xlogy(a - 1, z) - z - sc.gammaln(a),
                                "cdf": lambda z, a: sc.gammainc(a, z), "sf": lambda z, a: sc.gammaincc(a, z),
                                "ppf": lambda q, a: sc.gammaincinv(a, q),
                                "isf": lambda q, a: sc.gammainccinv(a, q)}),
        "chi2": (1, positive, {"logpdf": lambda z, k: sc.xlogy(k / 2 - 1, z) - z / 2 - sc.gammaln(k / 2)
                               - k / 2 * _LOG_2, "cdf": lambda z, k: sc.gammainc(k / 2, z / 2),
                               "sf": lambda z, k: sc.gammaincc(k / 2, z / 2),
                               "ppf": lambda q, k: 2 * sc.gammaincinv(k / 2, q),
                               "isf": lambda q, k: 2 * sc.gammainccinv(k / 2, q)}),
        "expon": (0, positive, {"logpdf": lambda z: -z, "cdf": lambda z: -np.expm1(-z),
                                "logcdf": lambda z: np.log(-np.expm1(-z)), "sf": lambda z: np.exp(-z),
                                "logsf": lambda z: -z, "ppf": lambda q: -np.log1p(-q),
                                "isf": lambda q: -np.log(q)}),
        "laplace": (0, None, {"logpdf": lambda z: -np.abs(z) - _LOG_2, "cdf": laplace_cdf,
                              "sf": lambda z: laplace_cdf(-z), "ppf": laplace_ppf,
                              "isf": lambda q: -laplace_ppf(q)}),
        "logistic": (0, None, {"logpdf": logistic_logpdf, "cdf": sc.expit, "logcdf": sc.log_expit,
                               "sf": lambda z: sc.expit(-z), "logsf": lambda z: sc.log_expit(-z),
                               "ppf": sc.logit, "isf": lambda q: -sc.logit(q)}),
        "cauchy": (0, None, {"logpdf": lambda z: -np.log1p(z * z) - _LOG_PI,
                             "cdf": lambda z: 0.5 + np.arctan(z) / math.pi,
                             "sf": lambda z: 0.5 - np.arctan(z) / math.pi,
                             "ppf": lambda q: np.tan(math.pi * (q - 0.5)),
                             "isf": lambda q: -np.tan(math.pi * (q - 0.5))}),
        "uniform": (0, unit, {"logpdf": lambda z: 0 * z, "cdf": lambda z: 1 * z, "sf": lambda z: 1 - z,
                              "ppf": lambda q: 1 * q, "isf": lambda q: 1 - q}),
        "gennorm": (1, None, {"logpdf": lambda z, b: np.log(b) - _LOG_2 - sc.gammaln(1 / b) - np.abs(z) ** b,
                              "cdf": gennorm_cdf, "sf": lambda z, b: gennorm_cdf(-z, b)}),
    }


def _tail(kind, std, support, z, shapes):
    """cdf, logcdf, sf or logsf at the standardised z: the family's own form, else from the cdf (sf as
    1 - cdf, the log of either), constant outside the support (0 and 1, or their logs)."""
    base = "sf" if kind in ("sf", "logsf") else "cdf"
    if kind in std:
        out = std[kind](z, *shapes)
    else:
        f = std[base](z, *shapes) if base in std else 1 - std["cdf"](z, *shapes)
        out = np.log(f) if kind.startswith("log") else f
    if support is not None:  # below the support the cdf is 0, above it 1 (the sf the other way)
        low, high = (0.0, 1.0) if base == "cdf" else (1.0, 0.0)
        low, high = (np.log(low), np.log(high)) if kind.startswith("log") else (low, high)
        out = np.where(value_of(z) < 0, low, np.where(support(z), out, high))
    return out


def _continuous(kind, names, support, std):
    """``kind`` (logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf) of a location-scale family with shape
    parameters ``names`` from its standard form."""
    nshapes = len(names)

    def compose(x, *args, **kw):
        known = names[len(args):] + ("loc", "scale")[max(0, len(args) - nshapes):]
        if len(args) > nshapes + 2 or set(kw) - set(known):
            raise NotTraceable(", ".join(sorted(set(kw) - set(known))) + "=" if kw else "too many arguments")
        given = dict(zip(names + ("loc", "scale"), args), **kw)
        if any(n not in given for n in names):
            raise NotTraceable("a shape parameter missing")  # scipy has raised already
        loc, scale = given.get("loc", 0.0), given.get("scale", 1.0)
        shapes = [given[n] for n in names]
        real_only(x, loc, scale, *shapes)
        if np.any(np.asarray(value_of(scale)) <= 0):
            raise NotTraceable("scale <= 0: scipy's value is nan")
        with np.errstate(divide="ignore", invalid="ignore"):
            if kind in ("ppf", "isf"):  # x is the probability q
                inverse = std.get(kind) or (lambda q, *a: std["ppf"](1 - q, *a))
                return loc + scale * inverse(x, *shapes)
            z = (x - loc) / scale
            if kind in ("cdf", "logcdf", "sf", "logsf"):
                return _tail(kind, std, support, z, shapes)
            out = std["logpdf"](z, *shapes) - np.log(scale)
            if support is not None:
                out = np.where(support(z), out, -np.inf)
            return np.exp(out) if kind == "pdf" else out

    return compose


def _poisson(kind, sc):
    def compose(k, mu, loc=0):
        _plain("k", k)
        _plain("loc", loc)
        real_only(mu)
        kk = np.asarray(k) - loc
        if kind == "cdf":
            return np.where(kk < 0, 0.0, sc.gammaincc(np.floor(kk) + 1, mu))
        inside = (kk >= 0) & (kk == np.floor(kk))
        out = np.where(inside, sc.xlogy(kk, mu) - mu - sc.gammaln(np.where(inside, kk, 0) + 1), -np.inf)
        return np.exp(out) if kind == "pmf" else out

    return compose


def _discrete_families(sc):
    """name -> (parameters, which must stay plain, log pmf at an integer k in the support, that
    support's test): k and loc are always plain."""
    def log_choose(n, k):
        return sc.gammaln(n + 1) - sc.gammaln(k + 1) - sc.gammaln(n - k + 1)

    return {
        "bernoulli": (("p",), (), lambda k, p: sc.xlogy(k, p) + sc.xlog1py(1 - k, -p), lambda k: k <= 1),
        "geom": (("p",), (), lambda k, p: sc.xlog1py(k - 1, -p) + np.log(p), lambda k: k >= 1),
        "binom": (("n", "p"), ("n",), lambda k, n, p: log_choose(n, k) + sc.xlogy(k, p) + sc.xlog1py(n - k, -p),
                  lambda k, n: k <= n),
        "nbinom": (("n", "p"), (), lambda k, n, p: sc.gammaln(n + k) - sc.gammaln(k + 1) - sc.gammaln(n)
                   + sc.xlogy(n, p) + sc.xlog1py(k, -p), lambda k: True),
        "betabinom": (("n", "a", "b"), ("n",), lambda k, n, a, b: log_choose(n, k) + sc.betaln(k + a, n - k + b)
                      - sc.betaln(a, b), lambda k, n: k <= n),
    }


def _discrete(kind, names, plain, logpmf, support):
    """logpmf or pmf of a discrete family (k integer, shifted by loc); -inf (0) off its support."""
    def compose(k, *args, loc=0, **kw):
        given = dict(zip(names + ("loc",), args), **kw)
        if set(given) - set(names) - {"loc"} or any(n not in given for n in names):
            raise NotTraceable("unknown or missing parameters")
        loc = given.get("loc", loc)
        params = [given[n] for n in names]
        for name in ("k", "loc") + plain:
            _plain(name, {"k": k, "loc": loc, **given}[name])
        real_only(*params)
        kk = np.asarray(k) - loc
        fixed = [value_of(given[n]) for n in names if n in plain]
        inside = (kk >= 0) & (kk == np.floor(kk)) & support(kk, *fixed)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(inside, logpmf(np.where(inside, kk, 0), *params), -np.inf)
        return np.exp(out) if kind == "pmf" else out

    return compose


def _dirichlet(kind, sc):
    def compose(x, alpha):
        real_only(x, alpha)
        if np.ndim(value_of(alpha)) != 1:
            raise NotTraceable("alpha is not 1-d")  # scipy raises too, first
        if np.shape(value_of(x))[0] + 1 == np.shape(value_of(alpha))[0]:  # the last component implied
            x = np.concatenate([x, 1 - np.sum(x, axis=0, keepdims=True)], axis=0)
        log_b = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
        out = np.squeeze(np.sum(np.transpose(sc.xlogy(alpha - 1, np.transpose(x))), axis=0) - log_b)
        return np.exp(out) if kind == "pdf" else out

    return compose


def _multigammaln(sc):
    def compose(a, d):
        _plain("d", d)
        real_only(a)
        terms = sc.gammaln(np.expand_dims(a, -1) - np.arange(d) / 2)
        return np.sum(terms, axis=-1) + d * (d - 1) / 4 * math.log(math.pi)

    return compose


# --- scipy.linalg ---------------------------------------------------------------------------------------
def _solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_a=False,
                      overwrite_b=False, check_finite=True):
    if np.ndim(value_of(a)) < 2:
        raise NotTraceable("not a matrix")
    n = np.shape(value_of(a))[-1]
    if unit_diagonal:  # scipy reads neither the diagonal nor the other triangle
        tri = (np.tril(a, -1) if lower else np.triu(a, 1)) + np.eye(n)
    else:
        tri = np.tril(a) if lower else np.triu(a)
    mode = {0: "N", 1: "T", 2: "C"}.get(trans, trans)
    if mode in ("T", "C"):
        tri = np.swapaxes(np.conjugate(tri) if mode == "C" else tri, -1, -2)
    if np.ndim(value_of(b)) == 1:  # scipy's vector b, against a stack of matrices too (numpy 1 and 2 alike)
        return np.linalg.solve(tri, np.reshape(b, (n, 1)))[..., 0]
    return np.linalg.solve(tri, b)


def _solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    _plain("(l, u)", l_and_u)
    if np.ndim(value_of(ab)) != 2 or np.ndim(value_of(b)) > 2:
        raise NotTraceable("a batch of systems")
    lower, upper = (int(k) for k in l_and_u)
    m = np.shape(value_of(ab))[1]
    i, j = np.indices((m, m))
    band = (j - i <= upper) & (i - j <= lower)
    # a[i, j] is ab[u + i - j, j] inside the band; the unused corners of ab are read by nobody
    full = np.where(band, ab[np.where(band, upper + i - j, 0), j], 0.0)
    return np.linalg.solve(full, b)


def _solve_sylvester(original):
    import scipy.linalg as sl

    def rule(a, b, q):
        real_only(a, b, q)
        av, bv, qv = (np.asarray(value_of(x)) for x in (a, b, q))
        x = original(av, bv, qv)  # first: scipy's own errors
        if x.ndim != 2:
            raise NotTraceable("a batch of equations")
        la, lb = np.linalg.eigvals(av), np.linalg.eigvals(bv)
        gap = np.min(np.abs(la[:, None] + lb[None, :])) if la.size and lb.size else 1.0
        scale = max(1.0, float(np.max(np.abs(np.concatenate([la, lb]))))) if la.size + lb.size else 1.0
        if not gap > 1e-12 * scale:  # also nan
            raise NotTraceable("a and -b share an eigenvalue: no unique solution")
        parents = list({id(p): p for p in (a, b, q) if isinstance(p, Traced)}.values())
        if not parents:
            raise NotTraceable("traced non-data argument")

        def jvp(ts):
            # a x + x b = q: a dx + dx b = dq - da x - x db
            tan = dict(zip(map(id, parents), ts))
            ta, tb, tq = (tan.get(id(p)) if isinstance(p, Traced) else None for p in (a, b, q))
            rhs = np.zeros_like(x) if tq is None else np.array(tq, dtype=x.dtype)
            if ta is not None:
                rhs -= ta @ x
            if tb is not None:
                rhs -= x @ tb
            return sl.solve_sylvester(av, bv, rhs)

        def vjp(g):
            s = sl.solve_sylvester(av.T, bv.T, np.real(g))
            adj = {}
            for p, c in ((a, -s @ x.T), (b, -x.T @ s), (q, s)):  # one array passed twice: both parts
                adj[id(p)] = adj[id(p)] + c if id(p) in adj else c
            return [adj[id(p)] for p in parents]

        return record(x, parents, jvp, vjp)

    return rule


def _sqrtm(original):
    import scipy.linalg as sl

    def rule(a, *args, **kwargs):
        square(a)
        av = value_of(a)
        res = original(av, *args, **kwargs)
        x = np.asarray(res[0] if isinstance(res, tuple) else res)
        if np.iscomplexobj(x) and not np.iscomplexobj(av):
            raise NotTraceable("a complex square root of a real matrix")
        lam = np.linalg.eigvals(x)
        gap = np.min(np.abs(lam[:, None] + lam[None, :])) if lam.size else 1.0
        if not gap > 1e-12 * max(1.0, float(np.max(np.abs(lam)))):  # also nan
            raise NotTraceable("a singular matrix: sqrtm has no derivative there")
        xh = np.conjugate(x).T

        def jvp(ts):
            return sl.solve_sylvester(x, x, ts[0])

        def vjp(g):
            return [for_parent(sl.solve_sylvester(xh, xh, g), av.dtype)]

        node = record(x, [a], jvp, vjp) if isinstance(a, Traced) else x
        return (node,) + tuple(res[1:]) if isinstance(res, tuple) else node

    return rule


def _expm(original):
    import scipy.linalg as sl

    def rule(a):
        square(a)
        av = value_of(a)
        value = original(av)
        ah = np.conjugate(av).T
        return record(value, [a], lambda ts: sl.expm_frechet(av, ts[0], compute_expm=False),
                      lambda g: [for_parent(sl.expm_frechet(ah, g, compute_expm=False), av.dtype)])

    return rule


def _signal_convolve(original):
    import scipy.signal as ss

    def rule(in1, in2, mode="full", method="auto"):
        value = original(value_of(in1), value_of(in2), mode, method)
        return convolution(value, in1, in2, lambda x, y: ss.convolve(x, y, "full", method),
                           lambda g, w: ss.correlate(g, w, "valid", method))

    return rule


# --- the tables special.py registers --------------------------------------------------------------------
def composed(sc, st):
    """[(owner, name prefix, {attribute: composition})] for scipy's value with its derivative."""
    groups = [(sc, "scipy.special", {"multigammaln": _multigammaln(sc)})]
    for name, (nshapes, support, std) in _standard(sc).items():
        dist = getattr(st, name)
        kinds = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf") + (("ppf", "isf") if "ppf" in std else ())
        names = tuple(n.strip() for n in (dist.shapes or "").split(",") if n.strip())
        if len(names) != nshapes:  # another scipy's parametrisation: leave it to numerics
            continue
        groups.append((dist, f"scipy.stats.{name}", {k: _continuous(k, names, support, std) for k in kinds}))
    groups.append((st.poisson, "scipy.stats.poisson", {k: _poisson(k, sc) for k in ("logpmf", "pmf", "cdf")}))
    for name, (names, plain, logpmf, support) in _discrete_families(sc).items():
        groups.append((getattr(st, name), f"scipy.stats.{name}",
                       {k: _discrete(k, names, plain, logpmf, support) for k in ("logpmf", "pmf")}))
    groups.append((st.dirichlet, "scipy.stats.dirichlet", {k: _dirichlet(k, sc) for k in ("logpdf", "pdf")}))
    import scipy.linalg as sl
    groups.append((sl, "scipy.linalg", {"solve_triangular": _solve_triangular, "solve_banded": _solve_banded,
                                             **general_rules()}))
    return groups


def direct():
    """[(owner, name prefix, {attribute: rule factory of the original})]."""
    import scipy.integrate as si
    import scipy.linalg as sl
    import scipy.signal as ss
    return [(sl, "scipy.linalg", {"sqrtm": _sqrtm, "expm": _expm,
                                     "solve_sylvester": _solve_sylvester, **direct_rules()}),
            (ss, "scipy.signal", {"convolve": _signal_convolve}),
            (si, "scipy.integrate", {"odeint": odeint_rule})]
