"""Building, splitting, selecting and reordering arrays, and the operations along an axis, traced:
vjp and jvp against central differences (or a closed form where a derivative has a convention)."""
from __future__ import annotations


import numpy as np
import pytest
from trace_helpers import check_against_numerics, line_of

from gradcli.trace import trace
from gradcli.trace.arrays import CONSTRUCTORS

rng = np.random.default_rng(7)
W = rng.normal(size=5)
M = rng.normal(size=(3, 4))
M3 = rng.normal(size=(2, 3, 4))
V3 = rng.normal(size=(4, 3))


# --- building arrays from traced values ---------------------------------------------------------------
BUILD = {
    "loss_terms": (lambda w: np.array([np.sum(w ** 2), np.sum(np.abs(w))]) @ np.array([0.5, 2.0]), W),
    "scalars_and_numbers": (lambda w: np.array([w[0], 3.0, w[1] * w[2], 1]), W),
    "nested": (lambda w: np.array([[w[0], 2.0], [w[1], w[0] * w[3]]]), W),
    "rows": (lambda w: np.array([w, w ** 2, np.ones(5)]), W),
    "nested_rows": (lambda w: np.array([[w[:2], [1.0, w[4]]], [np.sin(w[2:4]), w[1:3]]]), W),
    "asarray": (lambda w: np.asarray([w[4], w[0]]) * w[:2], W),
    "asarray_tuple": (lambda w: np.asarray((w[:3], w[2:])), W),
    "asanyarray": (lambda w: np.asanyarray([[w[0]], [w[1]]]), W),
    "ndmin": (lambda w: np.array([w[0], w[1]], ndmin=3), W),
    "order_F": (lambda w: np.asarray([w[:3], w[1:4]], None, "F"), W),
    "stack_mixed": (lambda w: np.stack([w[0], w[1], 3.0]), W),
    "stack_rows": (lambda w: np.stack([w[:2], [7.0, w[3]]], axis=1), W),
    "concatenate_nested": (lambda w: np.concatenate([[w[0], w[1]], w, [2.0]]), W),
    "hstack_mixed": (lambda w: np.hstack([w[0], 2.0, w[2:4]]), W),
    "vstack_nested": (lambda w: np.vstack([[w[0], w[1]], [1.0, w[2]], w[3:]]), W),
    "r_": (lambda w: np.r_[w, 1.0, w[:2] * 2], W),
    "r_scalars": (lambda w: np.r_[w[0], 2.0, w[1]], W),
    "r_slice": (lambda w: np.r_[w[:2], 0:3] * w[0], W),
    "r_directive": (lambda w: np.r_["0,2", w[:3], w[1:4]], W),
    "c_": (lambda w: np.c_[w, w ** 2], W),
    "c_2d": (lambda w: np.c_[w.reshape(5, 1), np.ones(5), w[::-1]], W),
}


@pytest.mark.parametrize("fn, x", list(BUILD.values()), ids=list(BUILD))
def test_building_arrays(fn, x):
    t = check_against_numerics(fn, {"w": x}, ["w"])
    assert t.problems == []


def test_float32_dtype_is_differentiable():
    # float32 values: central differences cannot resolve them, the Jacobians are written out
    t = trace(lambda w: np.array([w[0], w[1] * 2], dtype=np.float32), {"w": W}, ["w"])
    assert t.ok and t.value.dtype == np.float32
    np.testing.assert_allclose(t.vjp(np.array([1.0, 3.0]))["w"], [1.0, 6.0, 0, 0, 0])
    np.testing.assert_allclose(t.jvp({"w": np.arange(5.0)}), [0.0, 2.0])
    t = trace(lambda w: w.astype(np.float32) * 3, {"w": W}, ["w"])
    assert t.ok and t.value.dtype == np.float32
    np.testing.assert_allclose(t.vjp(np.ones(5))["w"], np.full(5, 3.0))


def concatenates_into(w, buf):
    return np.sum(np.concatenate([w, w * 2], out=buf)) + w[0]  # <- here


def test_gathers_with_dtype_and_out():
    t = trace(lambda w: np.stack([w, w * 2], dtype=np.float32), {"w": W}, ["w"])
    assert t.ok and t.value.dtype == np.float32
    np.testing.assert_allclose(t.vjp(np.ones((2, 5)))["w"], np.full(5, 3.0))
    t = check_against_numerics(lambda w: np.concatenate([w, w * 2], dtype=int, casting="unsafe") * w[0],
                               {"w": W + 10.5}, ["w"])  # no integer nearby: integers are a constant factor
    assert t.problems == []
    buf = np.zeros(10)
    t = trace(concatenates_into, {"w": W, "buf": buf}, ["w"])
    assert t.problems == [f"np.concatenate (out=) is not traceable ({line_of(concatenates_into)})"]
    np.testing.assert_array_equal(buf, np.concatenate([W, W * 2]))  # numpy's values, not element numbers


def test_plain_lists_stay_plain_arrays_in_a_trace():
    def f(w):
        a, b = np.array([1.0, 2.0]), np.r_[1.0, 2.0, 0:2]
        assert type(a) is np.ndarray and type(b) is np.ndarray and type(np.asarray(a)) is np.ndarray
        return np.sum(w * a.sum() * b.sum())

    assert check_against_numerics(f, {"w": W}, ["w"]).problems == []


def test_numpy_constructors_are_numpy_s_own_outside_a_trace():
    seen = {}

    def f(w):
        seen["during"] = np.asarray is CONSTRUCTORS["asarray"]
        return np.sum(np.array([w[0], w[1]]))

    t = trace(f, {"w": W}, ["w"])
    np.asarray(1.0)  # the first call after the trace restores them
    assert not seen["during"] and t.ok
    assert all(getattr(np, name) is f for name, f in CONSTRUCTORS.items())
    assert np.array([1.0, 2.0]).dtype == float  # and they still work


def keeps_asarray_cut(w):
    return np.sum(np.asarray(w) * w)  # <- here


def builds_strings(w):
    return np.array([w[0], "a"])[:1].astype(float) * w[0]  # <- here


def test_asarray_of_a_traced_array_is_still_a_cut_and_strings_are_refused():
    t = trace(keeps_asarray_cut, {"w": W}, ["w"])
    assert t.problems == [f"np.asarray cut the trace ({line_of(keeps_asarray_cut)})"]
    t = trace(builds_strings, {"w": W}, ["w"])
    assert not t.ok
    assert f"np.array (dtype <U32) is not traceable ({line_of(builds_strings)})" in t.problems


# --- casts to integers carry no derivative and cut nothing --------------------------------------------
WI = np.column_stack([rng.normal(size=(4, 2)), [2.3, 0.4, 3.2, 1.6]])  # no integer: no jump
CASTS = {
    "np.int64": lambda W: np.sum(W[np.int64(W[:, -1]), 0] * W[:, 1]),
    "astype": lambda W: np.sum(W[W[:, -1].astype(int), :2] ** 2),
    "int()": lambda W: W[int(W[0, -1]), 0] * np.sum(W[:, :2]),
    "asarray_int": lambda W: np.sum(W[np.asarray(W[:, -1], dtype=np.intp), 1] * W[:, 0]),
    "array_int": lambda W: np.sum(np.array([W[1, -1], W[2, -1]], dtype=int) * W[:2, 0]),
}


@pytest.mark.parametrize("fn", list(CASTS.values()), ids=list(CASTS))
def test_integer_casts_leave_the_rest_of_the_trace_intact(fn):
    t = check_against_numerics(fn, {"W": WI}, ["W"])
    assert t.problems == []


def casts_to_object(w):
    return np.sum(w.astype(object) * w)  # <- here


def test_a_cast_to_object_is_a_cut():
    t = trace(casts_to_object, {"w": W}, ["w"])
    assert f"x.astype(object) cut the trace ({line_of(casts_to_object)})" in t.problems


# --- everything else, against central differences -----------------------------------------------------
NAN = np.array([0.5, np.nan, -np.inf, 1.5, np.inf, -2.0])
ZEROS1 = np.array([[1.5, 0.0, -2.0, 0.7], [0.3, 1.1, 0.0, 0.0], [2.0, -1.0, 0.5, 1.2]])
SMALL = np.array([0.0, 1e-9, -3e-4, 0.05, -0.09, 0.4, 1.0, -2.5, 3.0])
OPS = {
    # reorderings
    "sort": (lambda x: np.sort(x) * np.arange(5), W), "sort0": (lambda x: np.sort(x, axis=0), M),
    "sort_none": (lambda x: np.sort(x, axis=None), M), "sort_heap": (lambda x: np.sort(x, kind="heapsort"), M3),
    "sort_stable": (lambda x: np.sort(x, axis=1, stable=True), M3),
    "argsort_gather": (lambda x: x[np.argsort(x)] * np.arange(5), W),
    "take_along_argsort": (lambda x: np.take_along_axis(x, np.argsort(x, axis=0), axis=0), M),
    "take": (lambda x: np.take(x, [3, 0, 0, 9], axis=1, mode="clip"), M),
    "partition": (lambda x: np.partition(x, 2) * np.arange(5), W),
    "partition_kths": (lambda x: np.partition(x, [0, 2], axis=0), M),
    "partition_none": (lambda x: np.partition(x, 5, axis=None)[:6], M),
    # selections
    "select": (lambda x: np.select([x > 0.5, x < -0.5], [x ** 2, np.sin(x)], default=x * 3), M),
    "select_const": (lambda x: np.select([x[0] > 0, x[1] > 0], [x, 2.0]), M),
    "piecewise": (lambda x: np.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, lambda v: np.exp(v), 0.5]), M),
    "piecewise_args": (lambda x: np.piecewise(x, [x < 0], [lambda v, k: k * v, lambda v, k: v ** 3], 4.0), W),
    "piecewise_1cond": (lambda x: np.piecewise(x, x > 0, [np.sin]), W),
    "piecewise_0d": (lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2]), np.array(0.7)),
    "nan_to_num": (lambda x: np.nan_to_num(x, nan=1.0, posinf=9.0, neginf=-9.0) * 2, NAN),
    "nan_to_num_default": (lambda x: np.nan_to_num(x), NAN),
    # building from endpoints, appending, splitting
    "linspace": (lambda x: np.linspace(x[0], x[1], 7), W),
    "linspace_open": (lambda x: np.linspace(x[0], 3.0, 4, endpoint=False), W),
    "linspace_arrays": (lambda x: np.linspace(x[0], x[1:], 3, axis=-1), M),
    "linspace_num1": (lambda x: np.linspace(x[2], x[3], 1), W),
    "append": (lambda x: np.append(x, [1.0, x[0, 0]]), M),
    "append_axis": (lambda x: np.append(x, x[:1] * 2, axis=0), M),
    "split": (lambda x: np.concatenate([p * (k + 1) for k, p in enumerate(np.split(x, [1, 3], axis=1))], 1), M),
    "array_split": (lambda x: np.stack([np.sum(p, 0) * (k + 1) for k, p in enumerate(np.array_split(x, 2))]), W),
    "hsplit": (lambda x: np.hsplit(x, [3])[0] - np.hsplit(x, [3])[1].sum(), M),
    "vsplit": (lambda x: np.vsplit(x, 3)[1] * np.vsplit(x, 3)[2], M),
    "dsplit": (lambda x: np.dsplit(x, [1])[1] ** 2, M3),
    "unstack": (lambda x: np.unstack(x, axis=1)[2] * np.unstack(x)[0][0], M3),
    "rollaxis": (lambda x: np.rollaxis(x, 2), M3), "rollaxis_start": (lambda x: np.rollaxis(x, 0, 3), M3),
    "kron": (lambda x: np.kron(x, x[:2, :2]), M), "kron_const": (lambda x: np.kron(x[0], V3), M),
    "kron_nd": (lambda x: np.kron(x, x[0]), M3),
    # along an axis
    "diff": (lambda x: np.diff(x), W), "diff2": (lambda x: np.diff(x, n=2, axis=0), M),
    "diff_edges": (lambda x: np.diff(x, axis=1, prepend=0.5, append=x[:, :1]), M),
    "gradient": (lambda x: np.gradient(x), W), "gradient_h": (lambda x: np.gradient(x, 0.3), W),
    "gradient_e2": (lambda x: np.gradient(x, 0.5, edge_order=2), W),
    "gradient_coords": (lambda x: np.gradient(x, [0.0, 0.5, 1.7, 2.0, 3.5], edge_order=2), W),
    "gradient_coords1": (lambda x: np.gradient(x, [0.0, 0.5, 1.7], axis=0), M),
    "gradient_axis": (lambda x: np.gradient(x, axis=1, edge_order=2), M),
    "gradient_all": (lambda x: np.stack(np.gradient(x, 2.0, 0.5)), M),
    "gradient_3": (lambda x: np.gradient(x, axis=2, edge_order=2), M3[:, :, :3]),
    "cumprod": (lambda x: np.cumprod(x), M), "cumprod1": (lambda x: np.cumprod(x, axis=1), M3),
    "cumprod_zero": (lambda x: np.cumprod(x, axis=1), ZEROS1),
    "cumprod_zeros_flat": (lambda x: x.cumprod(), ZEROS1),
    "cumprod_zeros0": (lambda x: np.cumprod(x, axis=0), ZEROS1.T),
    "multiply.accumulate": (lambda x: np.multiply.accumulate(x), ZEROS1),
    "cumprod_int": (lambda x: np.cumprod(x + 2.5, dtype=int) * x, W),  # integers: a constant factor
    "cross": (lambda x: np.cross(x, V3[::-1]), V3), "cross_both": (lambda x: np.cross(x, x[::-1]), V3),
    "cross_axes": (lambda x: np.cross(x.T, V3, axisa=0, axisc=0), V3),
    "cross_axis": (lambda x: np.cross(x.T, x.T[::-1], axis=0), V3),
    "cross_bcast": (lambda x: np.cross(x, x[0]), V3),
    "cross_23": (lambda x: np.cross(x[:, :2], V3), V3), "cross_32": (lambda x: np.cross(x, V3[:, 1:]), V3),
    # contractions
    "einsum_sublist": (lambda x: np.einsum(x, [0, 1], M.T, [1, 2], [0, 2]), M),
    "einsum_sublist_implicit": (lambda x: np.einsum(x, [30, 1], x, [2, 1]), M),
    "einsum_sublist_ellipsis": (lambda x: np.einsum(x, [Ellipsis, 0, 1], x[0], [2, 1], [Ellipsis, 2, 0]), M3),
    "inner_0d": (lambda x: np.inner(x[0], x), W), "inner_0d_right": (lambda x: np.inner(x, 2.5), M),
    # elementwise
    "sinc": (lambda x: np.sinc(x), SMALL), "degrees": (lambda x: np.degrees(x), W),
    "radians": (lambda x: np.radians(x), W), "deg2rad": (lambda x: np.deg2rad(x), W),
    "rad2deg": (lambda x: np.rad2deg(x), W),
}


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")  # numpy's, cross
@pytest.mark.parametrize("fn, x", list(OPS.values()), ids=list(OPS))
def test_operations(fn, x):
    t = check_against_numerics(fn, {"x": x}, ["x"])
    assert t.problems == []


def test_linspace_step_and_batched_endpoints():
    def f(a, b):
        return np.linspace(a, b, 5, retstep=True)

    check_against_numerics(f, {"a": M[0], "b": M[1]}, ["a", "b"], output=0)
    check_against_numerics(f, {"a": M[0], "b": M[1]}, ["a", "b"], output=1)
    check_against_numerics(f, {"a": M[0], "b": 2.0}, ["a"], output=1)


def test_split_pieces_of_unequal_sizes():
    def f(x):
        a, b, c = np.array_split(x, 3, axis=1)  # 2, 1, 1 columns
        return np.concatenate([np.sum(a * 2, axis=1), b[:, 0] ** 2, np.tanh(c[:, 0])])

    t = check_against_numerics(f, {"x": M}, ["x"])
    assert t.value.shape == (9,)


def test_sort_ties_share_the_tangent_equally():
    x = np.array([[2.0, 1.0, 2.0, 0.5, 2.0], [1.0, 1.0, 3.0, 0.0, -1.0]])
    t = trace(lambda x: np.sort(x, axis=1), {"x": x}, ["x"])
    assert t.ok
    u = np.arange(10.0).reshape(2, 5)
    # row 0: the 2.0s (inputs 0, 2, 4) fill the last three places; row 1: the 1.0s fill places 2 and 3
    np.testing.assert_allclose(t.jvp({"x": u}), [[3.0, 1.0, 2.0, 2.0, 2.0], [9.0, 8.0, 5.5, 5.5, 7.0]])
    g = t.vjp(np.arange(10.0).reshape(2, 5))["x"]
    np.testing.assert_allclose(g, [[3.0, 1.0, 3.0, 0.0, 3.0], [7.5, 7.5, 9.0, 6.0, 5.0]])
    # as np.max's ties: the last sorted element agrees with np.max
    tm = trace(lambda x: np.max(x, axis=1), {"x": x}, ["x"])
    ts = trace(lambda x: np.sort(x, axis=1)[:, -1], {"x": x}, ["x"])
    np.testing.assert_allclose(tm.vjp(np.ones(2))["x"], ts.vjp(np.ones(2))["x"])


def test_cumprod_at_zeros_has_the_exact_derivative():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    t = trace(lambda x: np.cumprod(x), {"x": x}, ["x"])
    jac = np.stack([t.vjp(np.eye(5)[k])["x"] for k in range(5)])
    want = np.zeros((5, 5))
    for k in range(5):
        for j in range(k + 1):
            want[k, j] = np.prod(np.delete(x[:k + 1], j))
    np.testing.assert_array_equal(jac, want)
    np.testing.assert_array_equal(np.stack([t.jvp({"x": np.eye(5)[j]}) for j in range(5)], 1), want)


def test_nan_to_num_copy_false_rebinds_the_array():
    def f(x):
        y = x * 1.0
        np.nan_to_num(y, copy=False, posinf=5.0, neginf=-5.0)
        return y * 3

    t = check_against_numerics(f, {"x": NAN}, ["x"])
    np.testing.assert_allclose(t.vjp(np.ones(6))["x"], np.where(np.isfinite(NAN), 3.0, 0.0))


def test_sinc_derivative_near_zero_to_rounding():
    mpmath = pytest.importorskip("mpmath")
    x = np.array([0.0, 1e-8, -1e-4, 0.03, 0.0318, 0.0319, -0.2, 1.0, 2.5])
    t = trace(lambda x: np.sinc(x), {"x": x}, ["x"])
    with mpmath.workdps(40):
        want = [float(mpmath.diff(lambda v: mpmath.sinc(mpmath.pi * v), mpmath.mpf(float(v)))) for v in x]
    np.testing.assert_allclose(t.jvp({"x": np.ones_like(x)}), want, rtol=1e-13, atol=1e-300)


def partitions_ties(x):
    return np.partition(x, 1)  # <- here


def sorts_complex(x):
    return np.abs(np.sort(x * 1j))  # <- here


def gradient_of_traced_spacing(x):
    return np.gradient(x, x[0])  # <- here


def test_what_is_refused_is_named():
    for fn, x, call in [(partitions_ties, np.array([1.0, 3.0, 1.0, 2.0]), "np.partition (tied elements)"),
                        (sorts_complex, W, "np.sort (complex input)"),
                        (gradient_of_traced_spacing, W, "np.gradient (traced spacing)")]:
        t = trace(fn, {"x": x}, ["x"])
        assert not t.ok
        assert f"{call} is not traceable ({line_of(fn)})" in t.problems, t.problems
        np.testing.assert_allclose(t.value, fn(x))


def test_full_and_full_like_with_a_traced_fill_value():
    # every element is a copy of the fill value: d/dv sum(full(shape, v) * w) = sum(w)
    def f(x):
        return np.sum(np.full((2, 3), x[0]) * x[1]) + np.sum(np.full_like(x, x[1])) + np.sum(np.full_like(x, 2.0))
    check_against_numerics(f, {"x": np.array([1.5, 2.0])}, ["x"])
    t = trace(lambda x: np.sum(np.full((2,), x[0], dtype=int) + x), {"x": np.array([1.5, 2.0])}, ["x"])
    assert t.ok and np.array_equal(t.vjp(np.ones(()))["x"], [1.0, 1.0])  # an int array: constant in x[0]


def test_real_if_close_keeps_the_real_part_or_the_complex_value():
    # a tiny imaginary part is dropped (the derivative is the real part's), a large one kept
    f = lambda x: np.sum(np.real_if_close(np.exp(1j * x * 1e-20) * x) ** 2)  # noqa: E731
    t = trace(f, {"x": np.array([1.5, -2.0])}, ["x"])
    assert t.ok and np.allclose(t.vjp(np.ones(()))["x"], [3.0, -4.0])
    g = lambda x: np.sum(np.abs(np.real_if_close(x + 1j)) ** 2)  # noqa: E731
    check_against_numerics(g, {"x": np.array([1.5, -2.0])}, ["x"])
