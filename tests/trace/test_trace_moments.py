"""var, std, nanvar and nanstd at every ddof that leaves a degree of freedom, over axes and keepdims:
the traced vjp and jvp against mpmath's differences of the same moments written on exact numbers."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mp_helpers import mp_apply, mp_jacobian

from gradcli.trace import trace


def mp_moment(x, axis, ddof, keepdims, root, mask=None):
    """var (std) over the entries where ``mask`` holds, as numpy defines them, on an object array."""
    mask = np.ones(x.shape, bool) if mask is None else mask
    count = np.sum(mask, axis=axis, keepdims=True)
    mean = np.sum(np.where(mask, x, 0), axis=axis, keepdims=True) / count
    dev = np.where(mask, x - mean, 0)
    var = np.sum(dev * dev, axis=axis, keepdims=keepdims) / (np.sum(mask, axis=axis, keepdims=keepdims) - ddof)
    return mp_apply(mpmath.sqrt, var) if root else var


def _axes(axis, ndim):
    return range(ndim) if axis is None else [a % ndim for a in np.atleast_1d(axis)]


def assert_traced_moment(func, x, axis, ddof, keepdims, root, mask=None, seed=0):
    plain = x if mask is None else np.where(mask, x, np.nan)
    t = trace(lambda x: func(x, axis=axis, ddof=ddof, keepdims=keepdims), {"x": plain}, ["x"])
    assert t.ok, t.problems
    jac = mp_jacobian(lambda v: mp_moment(v, axis, ddof, keepdims, root, mask), np.where(np.isnan(plain), 0, x))
    np.testing.assert_allclose(t.value, func(plain, axis=axis, ddof=ddof, keepdims=keepdims), rtol=1e-14)
    rng = np.random.default_rng(seed)
    v, u = rng.normal(size=t.value.shape), rng.normal(size=x.shape)
    scale = max(1.0, float(np.max(np.abs(jac))))
    np.testing.assert_allclose(t.vjp(v)["x"].ravel(), jac.T @ v.ravel(), rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(t.jvp({"x": u}).ravel(), jac @ u.ravel(), rtol=1e-10, atol=1e-10 * scale)


def test_std_with_one_degree_of_freedom_left_is_not_zero():
    x = np.array([0.3, -1.2, 0.5])
    t = trace(lambda x: np.std(x, ddof=2), {"x": x}, ["x"])
    d = x - x.mean()
    # std = sqrt(sum(d^2)): its gradient is d / std, not the 0 of a one-element std
    np.testing.assert_allclose(t.gradient()["x"], d / np.sqrt(np.sum(d * d)), rtol=1e-14)
    assert_traced_moment(np.std, x, None, 2, False, True)


AXES = [None, 0, 1, -1, (0, 1)]


@pytest.mark.parametrize("root", [False, True], ids=["var", "std"])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_every_ddof_over_axes(root, axis, keepdims):
    x = np.random.default_rng(3).normal(size=(3, 4))
    n = math.prod(x.shape[a] for a in _axes(axis, x.ndim))
    for ddof in range(n):
        assert_traced_moment(np.std if root else np.var, x, axis, ddof, keepdims, root)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 2**32 - 1),
       data=st.data(), root=st.booleans(), keepdims=st.booleans())
def test_moments_property(shape, seed, data, root, keepdims):
    x = np.random.default_rng(seed).normal(size=shape) * 10.0 ** np.random.default_rng(seed).integers(-3, 4)
    axis = data.draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    n = math.prod(x.shape[a] for a in _axes(axis, x.ndim))
    ddof = data.draw(st.integers(0, n - 1))
    assert_traced_moment(np.std if root else np.var, x, axis, ddof, keepdims, root, seed=seed)


@pytest.mark.parametrize("root", [False, True], ids=["nanvar", "nanstd"])
@pytest.mark.parametrize("axis", [None, 0, 1], ids=str)
def test_nan_moments_every_ddof(root, axis):
    x = np.random.default_rng(4).normal(size=(3, 5))
    mask = np.ones(x.shape, bool)
    mask[0, 1] = mask[2, 3] = mask[2, 4] = mask[1, 1] = False  # column 1 keeps one entry
    count = np.sum(mask, axis=axis)
    for ddof in range(int(np.min(count))):
        assert_traced_moment(np.nanstd if root else np.nanvar, x, axis, ddof, False, root, mask)


def test_nanstd_of_a_single_entry_is_identically_zero():
    x = np.array([[np.nan, 2.0, 1.0], [0.5, np.nan, -1.0]])
    t = trace(lambda x: np.sum(np.nanstd(x, axis=0)), {"x": x}, ["x"])
    g = t.gradient()["x"]
    assert np.all(np.isfinite(g)) and g[1, 0] == 0 and g[0, 1] == 0
    np.testing.assert_allclose(g[:, 2], [0.5, -0.5])


@pytest.mark.parametrize("func", [np.var, np.std, np.nanvar, np.nanstd], ids=lambda f: f.__name__)
@pytest.mark.parametrize("ddof", [3, 4])
def test_no_degree_of_freedom_left_is_refused_not_differentiated(func, ddof):
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):  # numpy's own warning, from the value
        t = trace(lambda x: func(x, ddof=ddof), {"x": np.array([0.3, -1.2, 0.5])}, ["x"])
    assert not t.ok and "not traceable" in t.problems[0]
