"""scipy.linalg's factorizations and general-matrix functions.

* compositions (:func:`general_rules`: solve, inv, det, pinv, eigvals, eigvalsh, svdvals, norm,
  cholesky, cho_solve, lu_solve, block_diag, toeplitz, hankel, circulant):
  numpy's traced calls on the matrix scipy reads; :mod:`gradcli.trace.special` keeps scipy's value and
  takes the derivative from them (numpy.linalg's rules, :mod:`gradcli.trace.linalg`);
* rules of the original (:func:`direct_rules`): lu with its own jvp and vjp (refused at tied pivots,
  where P jumps), and svd, eigh, qr, cho_factor and lu_factor built on numpy's and lu's nodes.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record, value_of
from gradcli.trace.contract import near
from gradcli.trace.linear import for_parent, with_value


def square(a):
    if np.ndim(value_of(a)) != 2:
        raise NotTraceable("not a 2-d matrix")


def _assumed(a, assume_a, lower):
    """The matrix scipy's solver for ``assume_a`` reads: a general one whole (scipy's own detection of
    structure, assume_a=None, finds what is exactly there, so the whole matrix still counts), a symmetric
    or Hermitian one from the triangle ``lower`` names; other structures are refused."""
    kind = {None: "gen", "general": "gen", "gen": "gen", "sym": "sym", "symmetric": "sym", "her": "her",
            "hermitian": "her", "pos": "her", "positive definite": "her"}.get(assume_a)
    if kind is None:
        raise NotTraceable(f"assume_a={assume_a!r}")
    if kind == "gen":
        return a
    square(a)
    tri = np.tril(a, -1) if lower else np.triu(a, 1)
    other = np.transpose(np.conjugate(tri) if kind == "her" else tri)
    diag = np.real(np.diagonal(a)) if kind == "her" else np.diagonal(a)  # LAPACK reads no Im(diagonal)
    return tri + other + diag * np.eye(np.shape(value_of(a))[-1])


def _solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a=None,
           transposed=False):
    square(a)
    m = _assumed(a, assume_a, lower)
    return np.linalg.solve(np.transpose(m) if transposed else m, b)


def _inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    square(a)
    return np.linalg.inv(_assumed(a, assume_a, lower))


def _det(a, overwrite_a=False, check_finite=True):
    return np.linalg.det(a)


def _pinv(a, *, atol=None, rtol=None, return_rank=False, check_finite=True):
    # scipy's default cutoff is numpy's (max(m, n) eps s_max), and the rule refuses a matrix with a
    # singular value near it; another cutoff or the rank is left to numerics
    if atol is not None or rtol is not None or return_rank:
        raise NotTraceable("atol=, rtol= or return_rank=")
    return np.linalg.pinv(a)


def _eigvals(a, b=None, overwrite_a=False, check_finite=True, homogeneous_eigvals=False):
    if b is not None or homogeneous_eigvals:
        raise NotTraceable("b= or homogeneous_eigvals=")
    square(a)
    return np.linalg.eigvals(a)


def _phases(vecs, target):
    """The unit factor of each column of ``vecs`` (plain values) that gives ``target``'s column: scipy's
    LAPACK call may choose another sign or phase for a vector than numpy's."""
    k = target.shape[-1]
    phase = np.sum(np.conjugate(vecs[..., :k]) * target, axis=-2)
    if not np.allclose(np.abs(phase), 1, rtol=0, atol=1e-6):
        raise NotTraceable("scipy's vectors are not numpy's up to a phase")
    return phase


def _svd(original):
    """scipy.linalg.svd as numpy's traced svd, each singular pair turned by the constant phase (a sign,
    for a real matrix) that takes numpy's vectors to scipy's."""
    def rule(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
             lapack_driver="gesdd"):
        value = original(value_of(a), full_matrices, compute_uv, check_finite=check_finite,
                         lapack_driver=lapack_driver)
        res = np.linalg.svd(a, full_matrices, compute_uv)
        if not compute_uv:
            return with_value(res, value)
        (u, s, vt), (us, ss, vts) = res, value
        phase = _phases(value_of(u), us[..., :s.shape[-1]])
        return (with_value(u * phase[..., None, :], us), with_value(s, ss),
                with_value(np.conjugate(phase)[..., :, None] * vt, vts))

    return rule


def _eigh(original):
    """scipy.linalg.eigh of one matrix (no b, no subset) as numpy's traced eigh of the same triangle,
    each vector turned to scipy's phase."""
    def rule(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False, type=1,
             check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
        if b is not None or subset_by_index is not None or subset_by_value is not None:
            raise NotTraceable("b= or a subset")
        square(a)
        value = original(value_of(a), lower=lower, eigvals_only=eigvals_only, check_finite=check_finite,
                         driver=driver)
        w, v = np.linalg.eigh(a, "L" if lower else "U")
        if eigvals_only:
            return with_value(w, value)
        return with_value(w, value[0]), with_value(v * _phases(value_of(v), value[1])[None, :], value[1])

    return rule


def _qr(original):
    """scipy.linalg.qr without pivoting as numpy's traced qr (full: 'complete', economic: 'reduced'),
    R's rows and Q's columns turned to scipy's signs (phases)."""
    def rule(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
        if pivoting or mode not in ("full", "economic", "r"):
            raise NotTraceable("pivoting= or mode=" + repr(mode))
        if np.ndim(value_of(a)) != 2:
            raise NotTraceable("not a 2-d matrix")
        value = original(value_of(a), mode=mode, check_finite=check_finite)
        q, r = np.linalg.qr(a, "complete" if mode == "full" else "reduced")
        rs = value[0] if mode == "r" else value[1]
        k = min(np.shape(value_of(r)))
        d = np.diagonal(value_of(r))[:k]
        phase = np.where(d == 0, 1, np.diagonal(rs)[:k] / np.where(d == 0, 1, d))
        r2 = np.concatenate([phase[:, None] * r[:k], r[k:]])
        if mode == "r":  # R of the full factorization: below the reduced one's rows, zeros
            return (with_value(np.pad(r2, ((0, rs.shape[0] - r2.shape[0]), (0, 0))), rs),)
        r2 = with_value(r2, rs)
        return with_value(np.concatenate([q[:, :k] * np.conjugate(phase), q[:, k:]], axis=1), value[0]), r2

    return rule


def _cabs1(z):
    return np.abs(np.real(z)) + np.abs(np.imag(z))


def _lu_factors(av, m, n):
    """P and the square completions of L (m x m, unit lower) and U (n x n, upper) of A = P L U."""
    import scipy.linalg as sl
    p, l, u = sl.lu(av)
    k = min(m, n)
    diag = np.abs(np.diagonal(u, axis1=-2, axis2=-1))
    if np.any(diag <= near(u) * np.max(np.abs(u), axis=(-2, -1))[..., None]):
        raise NotTraceable("a singular (or nearly) matrix")
    # partial pivoting's tie, where the permutation jumps: a candidate l_ik u_kk as large as the pivot
    # u_kk in LAPACK's measure |Re| + |Im| (for a real matrix, |l_ik| = 1)
    ukk = np.diagonal(u, axis1=-2, axis2=-1)[..., None, :k]
    if np.any(_cabs1(np.tril(l, -1)[..., :, :k] * ukk) >= (1 - 1e-8) * _cabs1(ukk)):
        raise NotTraceable("tied pivots")
    lt = np.broadcast_to(np.eye(m, dtype=l.dtype), l.shape[:-2] + (m, m)).copy()
    lt[..., :, :k] = l
    ut = np.broadcast_to(np.eye(n, dtype=u.dtype), u.shape[:-2] + (n, n)).copy()
    ut[..., :k, :] = u
    return p, lt, ut, k


def _lu(original):
    """scipy.linalg.lu, JAX's rule for A = P L U with L, U completed to squares: F = L^-1 P^T dA U^-1,
    dL = L tril(F, -1), dU = triu(F) U; its adjoint P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H."""
    def rule(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
        av = np.asarray(value_of(a))
        res = original(av, permute_l=permute_l, check_finite=check_finite, p_indices=p_indices)
        if av.ndim < 2 or 0 in av.shape[-2:]:
            raise NotTraceable("not a matrix")
        m, n = av.shape[-2:]
        p, lt, ut, k = _lu_factors(av, m, n)

        def right_inverse(x, w):  # x w^-1
            return np.swapaxes(np.linalg.solve(np.swapaxes(w, -1, -2), np.swapaxes(x, -1, -2)), -1, -2)

        def f_of(t):
            return right_inverse(np.linalg.solve(lt, np.swapaxes(p, -1, -2) @ t), ut)

        lh, uh = np.conjugate(np.swapaxes(lt, -1, -2)), np.conjugate(np.swapaxes(ut, -1, -2))

        def back(gl, gu):  # the cotangents of L (m x k) and U (k x n), zero beyond them
            g = gl if gl is not None else gu
            phi = np.zeros(np.broadcast_shapes(g.shape[:-2], av.shape[:-2]) + (m, n), np.result_type(lt, g))
            if gl is not None:
                phi[..., :, :k] += np.tril(lh @ gl, -1)
            if gu is not None:
                phi[..., :k, :] += np.triu(gu @ uh)
            return [for_parent(p @ right_inverse(np.linalg.solve(lh, phi), uh), av.dtype)]

        def dl(t):
            return (lt @ np.tril(f_of(t), -1))[..., :, :k]

        l_node = record(lt[..., :, :k], [a], lambda ts: dl(ts[0]), lambda g: back(np.asarray(g), None))
        u_node = record(ut[..., :k, :], [a], lambda ts: (np.triu(f_of(ts[0])) @ ut)[..., :k, :],
                        lambda g: back(None, np.asarray(g)))
        if permute_l:
            return with_value(p @ l_node, res[0]), u_node
        return (res[0], l_node, u_node)

    return rule


def _cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    square(a)
    # LAPACK reads one triangle: the matrix is that triangle's Hermitian completion
    if lower:
        sym = np.tril(a) + np.swapaxes(np.conjugate(np.tril(a, -1)), 0, 1)
    else:
        sym = np.triu(a) + np.swapaxes(np.conjugate(np.triu(a, 1)), 0, 1)
    factor = np.linalg.cholesky(sym)
    return factor if lower else np.swapaxes(np.conjugate(factor), 0, 1)


def _cho_factor(original):
    """(c, lower): the factor in its triangle, and in the other what scipy leaves there (a's entries)."""
    def rule(a, lower=False, overwrite_a=False, check_finite=True):
        square(a)
        c, low = original(value_of(a), lower=lower, check_finite=check_finite)
        rest = np.triu(a, 1) if low else np.tril(a, -1)
        if not np.array_equal(value_of(rest), np.triu(c, 1) if low else np.tril(c, -1)):
            rest = np.triu(c, 1) if low else np.tril(c, -1)  # not a's entries: scipy's, constant
        return with_value(_cholesky(a, lower=low) + rest, c), low

    return rule


def _cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    square(c)
    f = np.tril(c) if lower else np.conjugate(np.transpose(np.triu(c)))  # A = F F^H
    return np.linalg.solve(np.conjugate(np.transpose(f)), np.linalg.solve(f, b))


def _lu_factor(original):
    """(lu, piv) of a square matrix: L's strict lower triangle and U in one matrix, from lu's nodes
    (the same LAPACK factorization, so the same pivots)."""
    import scipy.linalg as sl

    def rule(a, overwrite_a=False, check_finite=True):
        square(a)
        lu, piv = original(value_of(a), check_finite=check_finite)
        _, l, u = _lu(sl.lu)(a)
        return with_value(np.tril(l, -1) + u, lu), piv

    return rule


def _lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    square(lu)
    if isinstance(piv, Traced):
        raise NotTraceable("traced piv: it is discrete")
    n = np.shape(value_of(lu))[0]
    perm = np.arange(n)
    for i, p in enumerate(np.asarray(piv)):  # LAPACK's row interchanges, in order: A = P L U
        perm[[i, p]] = perm[[p, i]]
    low, up = np.tril(lu, -1) + np.eye(n), np.triu(lu)
    mode = {0: "N", 1: "T", 2: "C"}.get(trans, trans)
    if mode == "N":
        return np.linalg.solve(up, np.linalg.solve(low, b[perm]))
    flip = (lambda m: np.conjugate(np.transpose(m))) if mode == "C" else np.transpose
    y = np.linalg.solve(flip(low), np.linalg.solve(flip(up), b))
    return y[np.argsort(perm)]


def direct_rules() -> dict:
    """scipy.linalg attribute -> rule factory of the original."""
    return {"svd": _svd, "eigh": _eigh, "qr": _qr, "lu": _lu, "cho_factor": _cho_factor, "lu_factor": _lu_factor}


def _eigvalsh(a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False, type=1, check_finite=True,
              subset_by_index=None, subset_by_value=None, driver=None):
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise NotTraceable("b= or a subset")
    square(a)
    return np.linalg.eigvalsh(a, "L" if lower else "U")


def _norm(a, ord=None, axis=None, keepdims=False, check_finite=True):
    return np.linalg.norm(a, ord, axis, keepdims)


def _svdvals(a, overwrite_a=False, check_finite=True):
    return np.linalg.svd(a, compute_uv=False)


def _block_diag(*arrs):
    """Each block padded into its place: the gathers of np.pad, summed."""
    blocks = [np.atleast_2d(x) for x in arrs]
    shapes = [np.shape(value_of(x)) for x in blocks]
    if any(len(sh) != 2 for sh in shapes):
        raise NotTraceable("a block of more than 2 dimensions")
    rows, cols = sum(sh[0] for sh in shapes), sum(sh[1] for sh in shapes)
    out, r, c = np.zeros((rows, cols)), 0, 0
    for x, (m, n) in zip(blocks, shapes):
        out = out + np.pad(x, ((r, rows - r - m), (c, cols - c - n)))
        r, c = r + m, c + n
    return out


def _vector(v, name):
    if np.ndim(value_of(v)) != 1:
        raise NotTraceable(f"{name} not a vector")
    return v


def _toeplitz(c, r=None):
    c = _vector(c, "c")
    r = np.conjugate(c) if r is None else _vector(r, "r")
    m, n = np.shape(value_of(c))[0], np.shape(value_of(r))[0]
    vals = np.concatenate([c[::-1], r[1:]])  # out[i, j] = vals[m - 1 - i + j]
    return vals[m - 1 - np.arange(m)[:, None] + np.arange(n)[None, :]]


def _hankel(c, r=None):
    c = _vector(c, "c")
    m = np.shape(value_of(c))[0]
    r = np.zeros(m) if r is None else _vector(r, "r")
    vals = np.concatenate([c, r[1:]])  # out[i, j] = vals[i + j]
    return vals[np.arange(m)[:, None] + np.arange(np.shape(value_of(r))[0])[None, :]]


def _circulant(c):
    c = _vector(c, "c")
    n = np.shape(value_of(c))[0]
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def general_rules() -> dict:
    """scipy.linalg attribute -> composition."""
    return {"solve": _solve, "inv": _inv, "det": _det, "pinv": _pinv, "eigvals": _eigvals, "cholesky": _cholesky,
            "cho_solve": _cho_solve, "lu_solve": _lu_solve, "eigvalsh": _eigvalsh, "norm": _norm,
            "svdvals": _svdvals, "block_diag": _block_diag, "toeplitz": _toeplitz, "hankel": _hankel,
            "circulant": _circulant}
