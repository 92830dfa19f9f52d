"""Differentiation rules for numpy.linalg (its norms are in :mod:`gradcli.trace.contract`).

Stacked ``(..., m, n)`` wherever numpy stacks; complex where a rule's ``plain`` allows (the convention of
:mod:`gradcli.trace.linear`: a holomorphic rule transposes with the conjugate transpose). Each rule keeps
numpy's own value and records one node per differentiable output of a tuple (numpy's own tuple type), so an
output the user never reads costs nothing. Where a derivative does not exist (repeated eigen- or singular
values, a rank-deficient matrix, log|det| of a singular one) the call is refused: the check falls back to
numerics. pinv and lstsq are in :mod:`gradcli.trace.pinv`, on the helpers here. The formulas: M. Giles,
"An extended collection of matrix derivative results for forward and reverse mode AD" (2008); J. Townsend,
"Differentiating the singular value decomposition" (2016); I. Murray, "Differentiation of the Cholesky
decomposition" (2016); H.-J. Liao et al., "Differentiable programming tensor networks" (2019) for QR.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.contract import matrix_norm_rule, near, vector_norm_rule
from gradcli.trace.linear import conj, for_parent, unbroadcast, with_value

# numpy 2 reads solve's b as a vector only when it is 1-D; numpy 1 when it has one axis fewer than a
_NUMPY2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def mT(x):
    return np.swapaxes(x, -1, -2)


def mH(x):
    return conj(mT(x))


def plain(*xs, complex_=False):
    """The values of real (or integer, or with ``complex_`` complex) matrix arguments; else refused."""
    vals = [np.asarray(value_of(x)) for x in xs]
    for v in vals:
        refuse_if(v.dtype.kind not in "fiub" + "c" * complex_, f"{v.dtype} input")
    refuse_if(vals[0].ndim >= 2 and min(vals[0].shape[-2:]) == 0, "an empty matrix")
    return vals


def node(value, a, jvp, vjp):
    """A node of one parent ``a``: jvp(t) and vjp(g) of its tangent and cotangent alone."""
    return record(value, [a], lambda ts: jvp(ts[0]), lambda g: [for_parent(vjp(np.asarray(g)), a.dtype)])


def _like(res, parts):
    return type(res)(*parts) if hasattr(res, "_fields") else tuple(parts)


def refuse_if(cond, why):
    if np.any(cond):
        raise NotTraceable(why)


def separated(w, what):
    """Refuse sorted values ``w`` (..., k) that (nearly) repeat: their derivatives do not exist."""
    scale = np.max(np.abs(w), axis=-1, keepdims=True)
    refuse_if(np.abs(np.diff(w, axis=-1)) <= near(w) * scale, f"repeated {what}")


def _inverse_gaps(w):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    return 1.0 / np.where(np.eye(w.shape[-1], dtype=bool), np.inf, w[..., None, :] - w[..., :, None])


def hermitian_of(t, lower):
    """The Hermitian matrix LAPACK reads from a triangle of ``t`` (cholesky, eigh: UPLO), Im(diagonal) unread."""
    h = np.tril(t, -1) if lower else np.triu(t, 1)
    return h + mH(h) + np.real(t) * np.eye(t.shape[-1], dtype=bool)


def hermitian_adjoint(p, lower):
    tri, k = (np.tril, -1) if lower else (np.triu, 1)
    return tri(p, k) + conj(tri(mT(p), k)) + np.real(p) * np.eye(p.shape[-1], dtype=bool)


# --- solve, inv, det, slogdet, matrix_power ----------------------------------------------------------
def solve_rule(a, b):
    av, bv = plain(a, b, complex_=True)
    x = np.linalg.solve(av, bv)
    vec = bv.ndim == 1 if _NUMPY2 else bv.ndim == av.ndim - 1
    x2, b2 = (x[..., None], bv.shape + (1,)) if vec else (x, bv.shape)
    ta_on, tb_on = isinstance(a, Traced), isinstance(b, Traced)

    def jvp(ts):  # dx = A^-1 (db - dA x)
        ta, tb = (ts[0] if ta_on else None), (ts[-1] if tb_on else None)
        rhs = 0 if tb is None else np.reshape(tb, b2)
        rhs = rhs if ta is None else rhs - ta @ x2
        dx = np.linalg.solve(av, rhs)
        return dx[..., 0] if vec else dx

    def vjp(g):  # gb = A^-H g, gA = -gb x^H
        gb = np.linalg.solve(mH(av), g[..., None] if vec else g)
        return ([for_parent(unbroadcast(-gb @ mH(x2), av.shape), av.dtype)] if ta_on else []) + \
               ([for_parent(unbroadcast(gb, b2).reshape(bv.shape), bv.dtype)] if tb_on else [])

    return record(x, [p for p in (a, b) if isinstance(p, Traced)], jvp, lambda g: vjp(np.asarray(g)))


def inv_rule(a):
    y = np.linalg.inv(plain(a, complex_=True)[0])
    return node(y, a, lambda t: -(y @ t @ y), lambda g: -(mH(y) @ g @ mH(y)))


def _cofactor(v):
    """det(A) A^-T from the SVD, det(U) det(V^H) conj(U adj(S) V^H), so that it holds at a singular A too."""
    u, s, vt = np.linalg.svd(v)
    one = np.ones_like(s[..., :1])
    before = np.cumprod(np.concatenate([one, s[..., :-1]], -1), -1)
    after = np.cumprod(np.concatenate([one, s[..., :0:-1]], -1), -1)[..., ::-1]
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * conj((u * (before * after)[..., None, :]) @ vt)


def det_rule(a):
    v, = plain(a, complex_=True)
    cof = functools.cache(lambda: _cofactor(v))
    return node(np.linalg.det(v), a, lambda t: np.sum(cof() * t, axis=(-2, -1)),
                 lambda g: g[..., None, None] * conj(cof()))


def slogdet_rule(a):
    v, = plain(a, complex_=True)
    res = np.linalg.slogdet(v)
    refuse_if(res[0] == 0, "a singular matrix: log|det| is -inf")
    w = functools.cache(lambda: mT(np.linalg.inv(v)))  # tr(A^-1 dA) = sum(W * dA), W = A^-T
    logdet = node(res[1], a, lambda t: np.real(np.sum(w() * t, axis=(-2, -1))),
                   lambda g: g[..., None, None] * conj(w()))
    if not np.iscomplexobj(v):
        return _like(res, [res[0], logdet])  # a real det's sign is piecewise constant: plain
    sign = node(res[0], a, lambda t: 1j * res[0] * np.imag(np.sum(w() * t, axis=(-2, -1))),  # i sign Im tr
                 lambda g: 1j * np.imag(np.conj(res[0]) * g)[..., None, None] * conj(w()))
    return _like(res, [sign, logdet])


def matrix_power_rule(a, n):
    value = np.linalg.matrix_power(plain(a, complex_=True)[0], n)
    n = operator.index(n)
    if n == 0:
        return value  # the identity: a constant
    z, n, out = (np.linalg.inv(a) if n < 0 else a), abs(n), None
    while n:  # square and multiply on traced arrays: the nodes of matmul (and inv)
        if n & 1:
            out = z if out is None else out @ z
        n >>= 1
        if n:
            z = z @ z
    return with_value(np.copy(out) if out is a else out, value)


def multi_dot_rule(arrays, *, out=None):
    if out is not None:
        raise NotTraceable("out=")
    value = np.linalg.multi_dot([value_of(x) for x in arrays])
    res = functools.reduce(np.dot, arrays)
    return with_value(res, value) if isinstance(res, Traced) else res


# --- factorizations ------------------------------------------------------------------------------------
def cholesky_rule(a, *, upper=False):
    v, = plain(a, complex_=True)
    c = np.linalg.cholesky(v, upper=True) if upper else np.linalg.cholesky(v)
    # upper=True reads the upper triangle and returns U = L^H: the lower case on conjugate transposes
    low, flip = (mH(c), mH) if upper else (c, lambda t: t)
    half = 1 - 0.5 * np.eye(c.shape[-1], dtype=c.real.dtype)

    def jvp(t):  # dL = L Phi(L^-1 dA L^-H), Phi: the lower triangle, half the (real) diagonal (Murray)
        x = mH(np.linalg.solve(low, mH(np.linalg.solve(low, hermitian_of(flip(t), True)))))
        return flip(low @ (np.tril(x) * half))

    def vjp(g):  # the adjoint under Re<.,.>: L^-H Phi(L^H G) L^-1, read back onto the lower triangle
        m = np.tril(mH(low) @ flip(g)) * half
        p = mH(np.linalg.solve(mH(low), mH(np.linalg.solve(mH(low), m))))
        return flip(hermitian_adjoint(p, True))

    return node(c, a, jvp, vjp)


def qr_rule(a, mode="reduced"):
    v, = plain(a, complex_=True)
    res = np.linalg.qr(v, mode=mode)
    m, n = v.shape[-2:]
    refuse_if(mode not in ("reduced", "complete", "r"), f"mode={mode!r}")
    refuse_if(m < n, "more columns than rows")
    refuse_if(mode == "complete" and m > n, "mode='complete' of a tall matrix: Q's last columns are arbitrary")
    q, r = np.linalg.qr(v) if mode == "r" else res
    diag = np.abs(np.diagonal(r, axis1=-2, axis2=-1))
    refuse_if(diag <= near(r) * np.max(np.abs(r), axis=(-2, -1))[..., None], "a rank-deficient matrix")
    eye = np.eye(n, dtype=bool)

    def parts(t):  # C = Q^H dA R^-1 = Omega + dR R^-1, Omega anti-Hermitian: dR R^-1 = C - Omega
        dar = mT(np.linalg.solve(mT(r), mT(t)))
        c = mH(q) @ dar
        low = np.tril(c, -1)
        # Omega's diagonal is i Im(diag C): R's real diagonal stays real (JAX's rule)
        up = c - low + mH(low)
        return (up - 1j * np.imag(c) * eye if np.iscomplexobj(c) else up), dar

    def back(gq, k):  # gA = (gQ + Q copyutl(K)) R^-H, K = gR R^H - Q^H gQ: the adjoint of parts
        u = np.triu(k) + mH(np.triu(k, 1))
        x = q @ (u - 1j * np.imag(k) * eye if np.iscomplexobj(u) else u) + gq
        return mH(np.linalg.solve(r, mH(x)))

    r_node = node(res if mode == "r" else r, a, lambda t: parts(t)[0] @ r, lambda g: back(0, g @ mH(r)))
    if mode == "r":
        return r_node

    def q_jvp(t):  # dQ = (dA - Q dR) R^-1
        up, dar = parts(t)
        return dar - q @ up

    return _like(res, [node(q, a, q_jvp, lambda g: back(g, -(mH(q) @ g))), r_node])


def _eig_nodes(a, w, vecs, lower, vectors):
    """Nodes for the eigenvalues ``w`` (and ``vecs()``, the eigenvectors V) of the Hermitian matrix read
    from ``a``: with dS that matrix's tangent, dw_i = v_i^H dS v_i, dV = V (F o V^H dS V) (Giles 3.1)."""
    separated(w, "eigenvalues")

    def w_jvp(t):
        return np.real(np.einsum("...ji,...jk,...ki->...i", conj(vecs()), hermitian_of(t, lower), vecs()))

    def w_vjp(g):
        return hermitian_adjoint((vecs() * g[..., None, :]) @ mH(vecs()), lower)

    w_node = node(w, a, w_jvp, w_vjp)
    if not vectors:
        return w_node
    # a complex eigenvector's phase is arbitrary: F's zero diagonal makes Im(v_i^H dv_i) = 0, JAX's choice
    v, f = vecs(), _inverse_gaps(w)
    return w_node, node(v, a, lambda t: v @ (f * (mH(v) @ hermitian_of(t, lower) @ v)),
                        lambda g: hermitian_adjoint(v @ (f * (mH(v) @ g)) @ mH(v), lower))


def eigh_rule(a, UPLO="L"):
    v, = plain(a, complex_=True)
    res = np.linalg.eigh(v, UPLO)
    return _like(res, _eig_nodes(a, res[0], lambda: res[1], UPLO.upper() == "L", True))


def eigvalsh_rule(a, UPLO="L"):
    v, = plain(a, complex_=True)
    vecs = functools.cache(lambda: np.linalg.eigh(v, UPLO)[1])
    return _eig_nodes(a, np.linalg.eigvalsh(v, UPLO), vecs, UPLO.upper() == "L", False)


def _eig_parts(v, w, vecs):
    """V (in w's order: eig's may differ from eigvals', LAPACK's other path) and V^-1, refused at
    repeated eigenvalues or a (nearly) defective matrix, where neither has a derivative."""
    we, vv = np.linalg.eig(v) if vecs is None else (w, vecs)
    order = np.argmin(np.abs(w[..., :, None] - we[..., None, :]), axis=-1)
    vv = np.take_along_axis(vv, order[..., None, :], axis=-1)
    gap = np.where(np.eye(w.shape[-1], dtype=bool), np.inf, np.abs(w[..., :, None] - w[..., None, :]))
    refuse_if(np.min(gap, axis=(-2, -1), initial=np.inf) <= near(gap) * np.max(np.abs(w), axis=-1),
              "repeated eigenvalues")
    refuse_if(np.linalg.cond(vv) > 1 / near(gap), "a defective (nearly) matrix")
    return vv, np.linalg.inv(vv)


def _eigenvalue_node(a, w, vecs, winv):
    """dw_i = (V^-1 dA V)_ii (Giles 3.1), complex-linear in dA: the vjp is V^-H diag(g) V^H (a real A's
    cotangent its real part)."""
    return node(w, a, lambda t: np.einsum("...ij,...jk,...ki->...i", winv, t, vecs),
                lambda g: mH(winv) @ (g[..., :, None] * mH(vecs)))


def eigvals_rule(a):
    v, = plain(a, complex_=True)
    w = np.linalg.eigvals(v)
    return _eigenvalue_node(a, w, *_eig_parts(v, w, None))


def eig_rule(a):
    """Eigenvalues and unit eigenvectors: dV = V (F o V^-1 dA V), F_ij = 1 / (w_j - w_i), less each
    column's real part along itself (the norm stays 1). A complex vector's phase is arbitrary: its
    derivative is JAX's (this formula), right for the functions that do not see the phase."""
    v, = plain(a, complex_=True)
    res = np.linalg.eig(v)
    w, vecs = res
    vecs, winv = _eig_parts(v, w, vecs)
    f = _inverse_gaps(w)

    def unit(x):  # x less V diag(Re(v_i^H x_i)): also its own adjoint
        return x - vecs * np.real(np.sum(conj(vecs) * x, axis=-2))[..., None, :]

    def vjp(g):
        return mH(winv) @ (conj(f) * (mH(vecs) @ unit(g))) @ mH(vecs)

    v_node = node(vecs, a, lambda t: unit(vecs @ (f * (winv @ t @ vecs))), vjp)
    return _like(res, [_eigenvalue_node(a, w, vecs, winv), v_node])


def _distinct_positive(s):
    """Singular values are kinks where one is zero or two meet (the vectors jump there)."""
    refuse_if(s[..., -1] <= near(s) * s[..., 0], "a zero singular value (a rank-deficient matrix)")
    separated(s, "singular values")


def sv_node(a, s, uv):
    """The singular values' node, ``uv()`` giving (U, V^H): ds_i = Re(u_i^H dA v_i) (Townsend)."""
    def jvp(t):
        return np.real(np.einsum("...ji,...jk,...ik->...i", conj(uv()[0]), t, conj(uv()[1])))

    def vjp(g):
        return (uv()[0] * g[..., None, :]) @ uv()[1]

    return node(s, a, jvp, vjp)


def svd_rule(a, full_matrices=True, compute_uv=True, hermitian=False):
    v, = plain(a, complex_=True)
    res = np.linalg.svd(v, full_matrices, compute_uv, hermitian)
    m, n = v.shape[-2:]
    refuse_if(hermitian, "hermitian=True")
    refuse_if(compute_uv and full_matrices and m != n,
               "full_matrices=True on a non-square matrix: the extra singular vectors are arbitrary")
    s = res[1] if compute_uv else res
    _distinct_positive(s)
    if not compute_uv:
        return sv_node(a, s, functools.cache(lambda: np.linalg.svd(v, full_matrices=False)[::2]))
    u, _, vt = res
    nodes = _svd_u_node(a, u, s, vt), sv_node(a, s, lambda: (u, vt)), _svd_vt_node(a, u, s, vt)
    return _like(res, nodes)


def _svd_u_node(a, u, s, vt):
    """dU = U (F o (dP S + S dP^H) + i Im(diag dP) / S) + (I - U U^H) dA V S^-1, dP = U^H dA V (Townsend;
    F_ij = 1 / (s_j^2 - s_i^2); the last term only for a tall A). A complex pair (u_i, v_i) is defined up
    to a common phase: its derivative is JAX's choice (v_i^H dv_i = 0, u_i's the rest, the diagonal
    term), so only a function that does not see the phase (U S V^H, |U|, U V^H) has this derivative, as
    in JAX and PyTorch."""
    m, n = a.shape[-2:]
    vv, f, row = mH(vt), _inverse_gaps(s ** 2), s[..., None, :]  # X * row = X S, row.mT * X = S X
    cplx = np.iscomplexobj(u)

    def diag(x):  # i Im(diag x) / s as a diagonal matrix; 0 for a real A
        return 1j * np.imag(np.diagonal(x, axis1=-2, axis2=-1))[..., None, :] / row * np.eye(s.shape[-1])

    def jvp(t):
        p = mH(u) @ t @ vv
        x = f * (p * row + mT(row) * mH(p))
        du = u @ (x + diag(p) if cplx else x)
        return du + (t @ vv - u @ p) / row if m > n else du

    def vjp(g):
        h = mH(u) @ g
        x = (f * (h - mH(h))) * row
        ga = u @ (x + diag(h) if cplx else x) @ vt
        return ga + ((g - u @ h) / row) @ vt if m > n else ga

    return node(u, a, jvp, vjp)


def _svd_vt_node(a, u, s, vt):
    """dV = V (F o (S dP + dP^H S)) + (I - V V^H) dA^H U S^-1 (the last term for a wide A); V^H's node."""
    m, n = a.shape[-2:]
    vv, f, row = mH(vt), _inverse_gaps(s ** 2), s[..., None, :]
    col = mT(row)

    def jvp(t):
        p = mH(u) @ t @ vv
        dv = vv @ (f * (col * p + mH(p) * row))
        return mH(dv + (mH(t) @ u - vv @ mH(p)) / row if n > m else dv)

    def vjp(g):
        gv = mH(g)
        ga = u @ (col * (f * (vt @ gv - g @ vv))) @ vt
        return ga + u @ (mH(gv - vv @ (vt @ gv)) / col) if n > m else ga

    return node(vt, a, jvp, vjp)


def svdvals_rule(x):
    v, = plain(x, complex_=True)
    s = np.linalg.svdvals(v)
    _distinct_positive(s)
    return sv_node(x, s, functools.cache(lambda: np.linalg.svd(v, full_matrices=False)[::2]))


def routes(d) -> dict:
    """numpy.linalg callable -> Route, built with ``d(impl)`` (a differentiable route)."""
    la = np.linalg
    table = {la.solve: solve_rule, la.inv: inv_rule, la.det: det_rule, la.slogdet: slogdet_rule,
             la.matrix_power: matrix_power_rule, la.multi_dot: multi_dot_rule, la.cholesky: cholesky_rule,
             la.qr: qr_rule, la.eigh: eigh_rule, la.eigvalsh: eigvalsh_rule, la.eigvals: eigvals_rule,
             la.eig: eig_rule,
             la.svd: svd_rule, getattr(la, "svdvals", None): svdvals_rule,
             getattr(la, "vector_norm", None): vector_norm_rule,  # these three: numpy 2
             getattr(la, "matrix_norm", None): matrix_norm_rule}
    return {f: d(rule) for f, rule in table.items() if f is not None}
