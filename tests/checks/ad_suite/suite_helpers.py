"""What the AD-suite model files share: a case registered under its own name, real outputs made from
complex ones, and the well-posed matrices the linear-algebra cases are built from (inside each
function, so the derivative flows through the construction).

Functions that build a case's function (a lambda around a ufunc) stay in the model files: a check is
reported at the file and line where its function's code is written."""
import types

import numpy as np


def named(fn, name):
    """``fn`` under the name ``name``: the same code, so the report's file:line stays where it is written."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    return copy


def parts(w):
    """The real and imaginary parts of ``w``, stacked: a real output that keeps all of ``w``."""
    return np.stack([np.real(w), np.imag(w)])


def eye_like(a):
    """The identity broadcast to the (possibly stacked) square matrices of ``a``."""
    return np.broadcast_to(np.eye(a.shape[-1]), a.shape)


def spd(a):
    """``a aᵀ + n I``: symmetric positive definite for any square (stack of) ``a``, eigenvalues >= n."""
    return a @ np.swapaxes(a, -1, -2) + a.shape[-1] * eye_like(a)


def sym(a):
    """The symmetric part of ``a``, so that a function of the lower triangle sees a symmetric matrix."""
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def separated(a):
    """A symmetric matrix with eigenvalues about 1, 3, 5, ... (at least 2 apart for small ``a``):
    eigenvectors are well defined there, so their derivative exists."""
    n = a.shape[-1]
    return np.diag(np.arange(1.0, 2.0 * n, 2.0)) + 0.1 * sym(a)
