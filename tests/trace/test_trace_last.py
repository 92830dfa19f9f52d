"""scipy.linalg's solve_sylvester and solve_banded, Fortran-order reshapes and ravels, np.array of a
traced array (a copy), and scipy.special.gammasgn (piecewise constant)."""
from __future__ import annotations


import numpy as np
import pytest

sl = pytest.importorskip("scipy.linalg")
sc = pytest.importorskip("scipy.special")

from trace_helpers import check_against_numerics, check_transpose, refused  # noqa: E402

from gradcli.trace import kind_of, trace  # noqa: E402

rng = np.random.default_rng(7)
A2 = np.array([[3.0, 0.5], [-0.4, 2.0]])
B3 = np.array([[1.5, 0.2, 0.0], [0.1, 2.5, -0.3], [0.4, 0.0, 1.0]])
Q23 = rng.normal(size=(2, 3))
X34 = rng.normal(size=(3, 4))


# --- scipy.linalg.solve_sylvester ---------------------------------------------------------------------
@pytest.mark.parametrize("wrt", [["a", "b", "q"], ["a"], ["b"], ["q"], ["a", "q"]], ids=str)
def test_solve_sylvester(wrt):
    inputs = {"a": A2, "b": B3, "q": Q23}
    check_against_numerics(lambda a, b, q: sl.solve_sylvester(a, b, q), inputs, wrt)
    check_transpose(lambda a, b, q: sl.solve_sylvester(a, b, q), inputs, wrt)


def test_solve_sylvester_one_array_twice_and_1x1():
    check_against_numerics(lambda a, q: sl.solve_sylvester(a, a, q), {"a": B3, "q": B3 @ B3.T}, ["a", "q"])
    check_against_numerics(lambda a, b, q: sl.solve_sylvester(a, b, q),
                           {"a": np.array([[2.0]]), "b": np.array([[0.5]]), "q": np.array([[1.5]])},
                           ["a", "b", "q"])


def sylvester_shared_eigenvalue(a):
    return sl.solve_sylvester(a, np.diag([-1.0, 3.0]), np.ones((2, 2)))  # <- here


def sylvester_complex(q):
    return sl.solve_sylvester(A2, A2, q * 1j)  # <- here


def sylvester_batched(a):
    return sl.solve_sylvester(a, a, np.ones((2, 2, 2)))  # <- here


def banded_batched(ab):
    return sl.solve_banded((1, 1), ab, np.ones((2, 3, 1)))  # <- here


def test_solve_sylvester_refusals():
    # a x + x b = q has no unique solution where a and -b share an eigenvalue
    refused(sylvester_shared_eigenvalue, {"a": np.diag([1.0, 2.0])}, ["a"],
            "scipy.linalg.solve_sylvester (a and -b share an eigenvalue")
    refused(sylvester_complex, {"q": np.ones((2, 2))}, ["q"], "scipy.linalg.solve_sylvester (complex input)")
    refused(sylvester_batched, {"a": np.stack([A2, A2.T])}, ["a"],
            "scipy.linalg.solve_sylvester (a batch of equations)")


def test_solve_banded_refuses_a_batch():
    ab = np.stack([_banded(1, 1, 3), _banded(1, 1, 3)])
    refused(banded_batched, {"ab": ab}, ["ab"], "scipy.linalg.solve_banded (a batch of systems)")


# --- scipy.linalg.solve_banded ------------------------------------------------------------------------
def _banded(lower, upper, m):
    ab = rng.normal(size=(lower + upper + 1, m))
    ab[upper] += 4.0  # a dominant diagonal: well conditioned
    return ab


@pytest.mark.parametrize("lu, bshape", [((1, 1), (5,)), ((1, 1), (5, 2)), ((2, 0), (5,)), ((0, 1), (5, 3)),
                                        ((0, 0), (5,)), ((2, 1), (1,))], ids=str)
def test_solve_banded(lu, bshape):
    m = bshape[0]
    inputs = {"ab": _banded(*lu, m), "b": rng.normal(size=bshape)}
    check_against_numerics(lambda ab, b: sl.solve_banded(lu, ab, b), inputs, ["ab", "b"])
    check_against_numerics(lambda ab, b: sl.solve_banded(lu, ab, b, check_finite=False), inputs, ["ab"])


def test_solve_banded_ignores_the_corners_of_ab():
    ab = _banded(1, 2, 4)  # ab[0, :2], ab[1, 0] and ab[3, 3] lie outside the matrix: scipy never reads them
    t = trace(lambda ab: sl.solve_banded((1, 2), ab, np.ones(4)), {"ab": ab}, ["ab"])
    assert t.ok, t.problems
    g = t.vjp(np.ones(4))["ab"]
    assert g[0, 0] == g[0, 1] == g[1, 0] == g[3, 3] == 0
    assert np.all(g[2] != 0)


# --- Fortran-order reshapes and ravels ---------------------------------------------------------------
M234 = rng.normal(size=(2, 3, 4))
RESHAPES = {
    "reshape_F": (lambda x: np.reshape(x, (4, 3), order="F"), X34),
    "reshape_F_positional": (lambda x: np.reshape(x, (2, 6), "F"), X34),
    "method_F": (lambda x: x.reshape(4, 3, order="F"), X34),
    "method_tuple_F": (lambda x: x.reshape((12,), order="F") * np.arange(12.0), X34),
    "reshape_F_3d": (lambda x: np.reshape(x, (4, -1), order="F"), M234),
    "reshape_F_size1": (lambda x: np.reshape(x, (1, 3, 1, 4), order="F"), X34),
    "reshape_F_0d": (lambda x: np.reshape(x, (1, 1), order="F"), np.array(1.5)),
    "ravel_F": (lambda x: np.ravel(x, order="F") * np.arange(24.0), M234),
    "ravel_F_positional": (lambda x: np.ravel(x, "F") * np.arange(12.0), X34),
    "ravel_method_F": (lambda x: x.ravel(order="F") * np.arange(12.0), X34),
    "flatten_F": (lambda x: x.flatten("F") * np.arange(12.0), X34),
    # x.T is Fortran-contiguous: "A" and "K" read it in Fortran order, in the value and the tangent
    "ravel_A_of_transpose": (lambda x: np.ravel(x.T, order="A") * np.arange(12.0), X34),
    "ravel_K_of_transpose": (lambda x: np.ravel(x.T, order="K") * np.arange(12.0), X34),
    "reshape_A_of_transpose": (lambda x: np.reshape(x.T, (2, 6), order="A"), X34),
    "reshape_A_of_c": (lambda x: np.reshape(x, (6, 2), order="A"), X34),
    "lowercase_f": (lambda x: np.reshape(x, (4, 3), order="f"), X34),
    "lowercase_c_and_none": (lambda x: np.reshape(x, (4, 3), order="c") * np.ravel(x, None).reshape(4, 3),
                             X34),
    "lowercase_a_of_transpose": (lambda x: np.ravel(x.T, "a") * np.arange(12.0), X34),
    "reshape_C_of_transpose": (lambda x: np.reshape(x.T, (12,)) * np.arange(12.0), X34),
}


@pytest.mark.parametrize("name", list(RESHAPES))
def test_fortran_order(name):
    fn, x = RESHAPES[name]
    check_against_numerics(fn, {"x": x}, ["x"])


def test_fortran_order_reads_the_elements_as_numpy_does():
    t = trace(lambda x: np.reshape(x, (3, 2), order="F"), {"x": np.arange(6.0).reshape(2, 3)}, ["x"])
    np.testing.assert_array_equal(t.value, [[0.0, 4.0], [3.0, 2.0], [1.0, 5.0]])
    g = t.vjp(np.arange(6.0).reshape(3, 2))["x"]
    np.testing.assert_array_equal(g, [[0.0, 4.0, 3.0], [2.0, 1.0, 5.0]])


def ravels_strided(x):
    return np.ravel(x[:, ::2], order="K")  # <- here


def test_order_k_of_a_strided_array_is_refused():
    refused(ravels_strided, {"x": X34}, ["x"], "np.ravel (order='K' of a non-contiguous array)")


# --- np.array of a traced array ----------------------------------------------------------------------
COPIES = {
    "copy": (lambda x: np.array(x) * x, X34),
    "ndmin": (lambda x: np.array(x, ndmin=3) * 2.0, X34),
    "order_F": (lambda x: np.array(x, order="F", copy=True) ** 2, X34),
    "no_copy": (lambda x: np.array(x, copy=False) + x, X34),
    "dtype_float": (lambda x: np.array(x, dtype=float) ** 3, X34),
    "0d": (lambda x: np.array(x) * x, np.array(0.7)),
    "of_a_result": (lambda x: np.array(np.sin(x), ndmin=2).T, np.linspace(0.1, 1.0, 4)),
}


@pytest.mark.parametrize("name", list(COPIES))
def test_np_array_of_a_traced_array_is_a_copy(name):
    fn, x = COPIES[name]
    check_against_numerics(fn, {"x": x}, ["x"])


def test_np_array_to_integers_is_plain_and_asarray_still_cuts():
    t = trace(lambda x: np.array(x, dtype=int) * x, {"x": X34 * 3}, ["x"])
    assert t.ok, t.problems
    np.testing.assert_array_equal(t.vjp(np.ones((3, 4)))["x"], (X34 * 3).astype(int))
    t = trace(lambda x: np.asarray(x) * x, {"x": X34}, ["x"])
    assert any(p.startswith("np.asarray cut the trace") for p in t.problems), t.problems


def copies_to_object(x):
    return np.array(x, dtype=object)  # <- here


def test_np_array_to_object_is_refused():
    refused(copies_to_object, {"x": X34}, ["x"], "np.array (dtype object)")


# --- scipy.special.gammasgn ---------------------------------------------------------------------------
def test_gammasgn_is_constant():
    assert kind_of(sc.gammasgn) == "constant"
    x = np.array([-2.5, -1.5, -0.5, 0.5, 3.0, 7.25])
    t = trace(lambda x: sc.gammasgn(x) * x + np.sum(sc.gammasgn(x)), {"x": x}, ["x"])
    assert t.ok and t.problems == []
    np.testing.assert_array_equal(t.value, sc.gammasgn(x) * x + np.sum(sc.gammasgn(x)))
    np.testing.assert_array_equal(t.vjp(np.ones(6))["x"], sc.gammasgn(x))
    np.testing.assert_array_equal(t.jvp({"x": np.ones(6)}), sc.gammasgn(x))
