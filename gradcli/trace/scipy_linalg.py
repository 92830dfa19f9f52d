"""scipy.linalg's general-matrix functions (solve, inv, det, pinv, eigvals, svd) as numpy's traced calls
on the matrix scipy reads: :mod:`gradcli.trace.special` keeps scipy's value and takes the derivative from
them (numpy.linalg's rules, :mod:`gradcli.trace.linalg`)."""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import NotTraceable, value_of
from gradcli.trace.linear import with_value


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


def _svd(original):
    """scipy.linalg.svd as numpy's traced svd, each singular pair turned by the constant phase (a sign,
    for a real matrix) that takes numpy's vectors to scipy's: another LAPACK call may choose others."""
    def rule(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
             lapack_driver="gesdd"):
        value = original(value_of(a), full_matrices, compute_uv, check_finite=check_finite,
                         lapack_driver=lapack_driver)
        res = np.linalg.svd(a, full_matrices, compute_uv)
        if not compute_uv:
            return with_value(res, value)
        (u, s, vt), (us, ss, vts) = res, value
        k = s.shape[-1]
        phase = np.sum(np.conjugate(value_of(u)[..., :k]) * us[..., :k], axis=-2)
        if not np.allclose(np.abs(phase), 1, rtol=0, atol=1e-6):
            raise NotTraceable("scipy's singular vectors are not numpy's up to a phase")
        return (with_value(u * phase[..., None, :], us), with_value(s, ss),
                with_value(np.conjugate(phase)[..., :, None] * vt, vts))

    return rule


def direct_rules() -> dict:
    """scipy.linalg attribute -> rule factory of the original."""
    return {"svd": _svd}


def general_rules() -> dict:
    """scipy.linalg attribute -> composition."""
    return {"solve": _solve, "inv": _inv, "det": _det, "pinv": _pinv, "eigvals": _eigvals}
