"""Every routed operation: traced vjp and jvp against central differences, and the traced value."""
from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import check_against_numerics, check_transpose

from gradcli.core.primitives import PRIMITIVES
from gradcli.trace import kind_of, trace
from gradcli.trace.rules import EXTRA_PARTIALS, TABLE_UFUNCS

rng = np.random.default_rng(42)
X = rng.normal(size=(3, 4))
Y = rng.normal(size=(3, 4))
ROW = rng.normal(size=(4,))
COL = rng.normal(size=(3, 1))
X3 = rng.normal(size=(2, 3, 4))
POS = rng.uniform(0.5, 2.0, size=(3, 4))


def _box(low, high, shape=(3, 4)):
    return np.random.default_rng(1).uniform(low, high, size=shape)


UNARY = [u for u in list(TABLE_UFUNCS) + list(EXTRA_PARTIALS) if u.nin == 1]
BINARY = [u for u in list(TABLE_UFUNCS) + list(EXTRA_PARTIALS) if u.nin == 2]


@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
def test_unary_ufuncs(ufunc):
    name = TABLE_UFUNCS.get(ufunc)
    low, high = PRIMITIVES[name].sample[0] if name else (-2.0, 2.0)
    if ufunc is np.reciprocal:
        low, high = 0.5, 2.0
    check_against_numerics(lambda x: ufunc(x), {"x": _box(low, high)}, ["x"])


@pytest.mark.parametrize("ufunc", BINARY, ids=lambda u: u.__name__)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (3, 4))],
                         ids=str)
def test_binary_ufuncs_broadcast(ufunc, shapes):
    name = TABLE_UFUNCS.get(ufunc)
    (lx, hx), (ly, hy) = PRIMITIVES[name].sample if name else ((-2.0, 2.0), (0.5, 2.0))
    if ufunc in (np.remainder, np.fmod):
        (lx, hx), (ly, hy) = (0.1, 3.0), (0.7, 1.3)
    inputs = {"x": _box(lx, hx, shapes[0]), "y": np.random.default_rng(2).uniform(ly, hy, shapes[1])}
    check_against_numerics(lambda x, y: ufunc(x, y), inputs, ["x", "y"])
    check_against_numerics(lambda x, y: ufunc(x, y), inputs, ["x"])  # y a constant
    check_against_numerics(lambda x, y: ufunc(x, y), inputs, ["y"])


OPERATORS = {
    "x**2": lambda x: x ** 2, "x**3": lambda x: x ** 3, "x**0.5": lambda x: abs(x) ** 0.5,
    "x**-1": lambda x: (x + 3) ** -1, "2**x": lambda x: 2 ** x, "-x": lambda x: -x, "+x": lambda x: +x,
    "abs": lambda x: abs(x), "x%1.5": lambda x: x % 1.5, "1/x": lambda x: 1 / (x + 3),
    "3-x*x/2": lambda x: 3 - x * x / 2, "x@y": lambda x: x @ X.T, "y@x": lambda x: X.T @ x,
}


@pytest.mark.parametrize("fn", list(OPERATORS.values()), ids=list(OPERATORS))
def test_operators(fn):
    check_against_numerics(fn, {"x": X}, ["x"])


def _with_zeros(n):
    x = X.copy()
    x.flat[[1, 6][:n]] = 0.0
    return x


STRUCTURAL = {
    # reductions
    "sum": (lambda x: np.sum(x), X), "sum0": (lambda x: np.sum(x, axis=0), X),
    "sum02k": (lambda x: np.sum(x, axis=(0, 2), keepdims=True), X3), "sum-1": (lambda x: x.sum(-1), X3),
    "mean": (lambda x: np.mean(x), X), "mean1k": (lambda x: np.mean(x, axis=1, keepdims=True), X),
    "prod": (lambda x: np.prod(x, axis=1), X), "prod0zero": (lambda x: np.prod(x, axis=1), _with_zeros(1)),
    "prod2zeros": (lambda x: np.prod(x), _with_zeros(2)), "prod_axes": (lambda x: x.prod(axis=(0, 2)), X3),
    "max": (lambda x: np.max(x), X), "max1": (lambda x: np.max(x, axis=1), X),
    "amax0k": (lambda x: np.amax(x, axis=0, keepdims=True), X), "min": (lambda x: np.min(x, axis=-1), X3),
    "amin": (lambda x: np.amin(x), X), "var": (lambda x: np.var(x), X),
    "var0ddof": (lambda x: np.var(x, axis=0, ddof=1), X), "std1k": (lambda x: np.std(x, axis=1, keepdims=True), X),
    "std_ddof": (lambda x: x.std(ddof=1), X), "cumsum": (lambda x: np.cumsum(x), X),
    "cumsum1": (lambda x: np.cumsum(x, axis=1), X), "add.reduce": (lambda x: np.add.reduce(x), X),
    "maximum.reduce": (lambda x: np.maximum.reduce(x, axis=1), X),
    "multiply.reduce": (lambda x: np.multiply.reduce(x), X), "add.accumulate": (lambda x: np.add.accumulate(x), X),
    # contractions
    "matmul": (lambda x: np.matmul(x, X.T), X), "matmul_vec": (lambda x: x[0] @ X.T, X),
    "matmul_matvec": (lambda x: x @ ROW, X), "matmul_batch": (lambda x: x @ X.T, X3),
    "matmul_bcast": (lambda x: np.matmul(x.reshape(2, 1, 3, 4), X3.transpose(0, 2, 1)[:, None]), X3),
    "matmul_both": (lambda x: x @ x.T, X), "dot11": (lambda x: np.dot(x[0], x[1]), X),
    "matmul11": (lambda x: x[0] @ x[1], X), "matmul11_const": (lambda x: x[0] @ ROW, X),
    "dot22": (lambda x: np.dot(x, X.T), X), "dot32": (lambda x: np.dot(x, X.T), X3),
    "dot21": (lambda x: x.dot(ROW), X), "dot0": (lambda x: np.dot(x, 2.0), X),
    "outer": (lambda x: np.outer(x[0], x[1:]), X), "inner": (lambda x: np.inner(x, X), X),
    "einsum_mm": (lambda x: np.einsum("ij,jk->ik", x, X.T), X), "einsum_trace": (lambda x: np.einsum("ii->", x[:, :3]), X),
    "einsum_sum": (lambda x: np.einsum("ij->", x), X), "einsum_diag": (lambda x: np.einsum("ii->i", x[:, :3]), X),
    "einsum_batch": (lambda x: np.einsum("bij,bkj->bik", x, x), X3),
    "einsum_ellipsis": (lambda x: np.einsum("...ij,kj->...ik", x, X), X3),
    "einsum_implicit": (lambda x: np.einsum("ij,kj", x, x), X), "einsum_only": (lambda x: np.einsum("ij,k->ik", x, ROW), X),
    "tensordot1": (lambda x: np.tensordot(x, X3, axes=1), rng.normal(size=(3, 2))), "tensordot2": (lambda x: np.tensordot(x, X3, axes=([1, 0], [1, 0])), rng.normal(size=(2, 3))),
    "trace": (lambda x: np.trace(x[:, :3]), X),
    # shapes
    "reshape": (lambda x: np.reshape(x, (2, 6)), X), "reshape_m": (lambda x: x.reshape(6, -1), X),
    "reshape_t": (lambda x: x.reshape((4, 3)), X), "ravel": (lambda x: np.ravel(x), X), "flatten": (lambda x: x.flatten(), X),
    "transpose": (lambda x: np.transpose(x, (2, 0, 1)), X3), "T": (lambda x: x.T, X3), "mT": (lambda x: x.mT, X3),
    "transpose_m": (lambda x: x.transpose(1, 0), X), "swapaxes": (lambda x: np.swapaxes(x, 0, 2), X3),
    "swapaxes_m": (lambda x: x.swapaxes(0, 1), X), "moveaxis": (lambda x: np.moveaxis(x, 0, -1), X3),
    "squeeze": (lambda x: np.squeeze(x[:, :1]), X), "squeeze_m": (lambda x: x[None].squeeze(0), X),
    "expand_dims": (lambda x: np.expand_dims(x, 1), X), "broadcast_to": (lambda x: np.broadcast_to(x, (2, 3, 4)), X),
    "broadcast_to1": (lambda x: np.broadcast_to(x[:, :1], (3, 4)) * X, X), "atleast_2d": (lambda x: np.atleast_2d(x[0]), X),
    "concatenate": (lambda x: np.concatenate([x, X, x[:1]], axis=0), X),
    "concatenate1": (lambda x: np.concatenate((x, x * 2), axis=1), X), "stack": (lambda x: np.stack([x, Y, x], axis=1), X),
    "hstack": (lambda x: np.hstack([x, Y]), X), "vstack": (lambda x: np.vstack([x[0], x]), X),
    "repeat": (lambda x: np.repeat(x, 2, axis=0), X), "repeat_flat": (lambda x: np.repeat(x, [1, 0, 2, 1], axis=1), X),
    "repeat_m": (lambda x: x.repeat(3), X), "tile": (lambda x: np.tile(x, (2, 1, 2)), X),
    "flip": (lambda x: np.flip(x, 1), X), "roll": (lambda x: np.roll(x, 2), X), "rot90": (lambda x: np.rot90(x), X),
    "pad": (lambda x: np.pad(x, 1, constant_values=3.0), X), "pad_edge": (lambda x: np.pad(x, ((0, 2), (1, 0)), mode="edge"), X),
    "diag": (lambda x: np.diag(x[0]), X), "diag2": (lambda x: np.diag(x), X), "triu": (lambda x: np.triu(x), X),
    "diagonal": (lambda x: np.diagonal(x, 1), X), "take": (lambda x: np.take(x, [0, 2, 2], axis=1), X),
    "take_along": (lambda x: np.take_along_axis(x, np.argsort(X, axis=1), axis=1), X),
    "copy": (lambda x: np.copy(x) * x.copy(), X), "astype": (lambda x: x.astype(np.float64) * 2, X),
    # selections
    "where": (lambda x: np.where(X > 0, x, x * x), X), "where_bcast": (lambda x: np.where(X > 0, x[0], 2.0), X),
    "where_y": (lambda x: np.where(X > 0, 1.0, np.sin(x)), X), "clip": (lambda x: np.clip(x, -0.5, 0.5), X),
    "clip_m": (lambda x: x.clip(min=-0.3), X), "clip_traced": (lambda x: np.clip(X, x[0] - 0.1, x[1] + 2), X),
    # indexing reads and writes
    "get_int": (lambda x: x[1], X), "get_slice": (lambda x: x[:, 1:3], X), "get_newaxis": (lambda x: x[..., None, ::-1], X),
    "get_step": (lambda x: x[::2, ::-2], X3), "get_fancy": (lambda x: x[[0, 2, 0, 0]], X),
    "get_pairs": (lambda x: x[np.arange(3), [1, 3, 1]], X), "get_mask": (lambda x: x[X > 0], X),
    "get_mixed": (lambda x: x[1:, [0, 0, 2]], X3), "iter": (lambda x: np.stack([r * i for i, r in enumerate(x)]), X),
    "set_slice": (lambda x: _set(x, np.s_[:, 1], x[:, 2] ** 2), X), "set_const": (lambda x: _set(x, np.s_[0], 0.0), X),
    "set_fancy": (lambda x: _set(x, ([0, 0, 2], [1, 1, 3]), x[1, :3]), X),
    "add_at": (lambda x: _add_at(x * 1.0, ([0, 0, 2],), x[::-1] * 3), X),
    "add_at_plain": (lambda x: _add_at(np.zeros((5, 4)), [0, 4, 0], x), X),
    "add_at_plain_used": (lambda x: np.tanh(_add_at(np.ones((5, 4)), [0, 4, 0], x) @ x.T), X),
    # norms
    "norm": (lambda x: np.linalg.norm(x), X), "norm_vec": (lambda x: np.linalg.norm(x[0]), X),
    "norm_axis": (lambda x: np.linalg.norm(x, axis=1), X), "norm_fro": (lambda x: np.linalg.norm(x, "fro"), X),
    "norm_2mat": (lambda x: np.linalg.norm(x, 2), X), "norm_1": (lambda x: np.linalg.norm(x[0], 1), X),
    "norm_inf": (lambda x: np.linalg.norm(x, np.inf, axis=0, keepdims=True), X),
    "norm_axes": (lambda x: np.linalg.norm(x, axis=(1, 2)), X3),
    # log-sum-exp and friends
    "logaddexp": (lambda x: np.logaddexp(x, 0.3 * x[0]), X), "lse": (lambda x: _lse(x), X * 30),
}


def _set(x, key, v):
    x = x * 1.0  # a traced copy: the input itself stays as given
    x[key] = v
    return x


def _add_at(a, idx, b):
    np.add.at(a, idx, b)
    return a


def _lse(x):
    m = x.max(axis=1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))).squeeze(1)


@pytest.mark.parametrize("fn, x", list(STRUCTURAL.values()), ids=list(STRUCTURAL))
def test_structural(fn, x):
    check_against_numerics(fn, {"x": x}, ["x"])
    check_transpose(fn, {"x": x}, ["x"], seeds=[0])


def test_every_listed_call_is_routed():
    listed = [np.add, np.subtract, np.multiply, np.divide, np.negative, np.positive, np.power, np.sin,
              np.arctan2, np.hypot, np.maximum, np.minimum, np.absolute, np.exp, np.expm1, np.log, np.log1p,
              np.log2, np.log10, np.sqrt, np.cbrt, np.square, np.reciprocal, np.tanh, np.logaddexp,
              np.logaddexp2, np.where, np.clip, np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin,
              np.var, np.std, np.matmul, np.dot, np.outer, np.einsum, np.tensordot, np.reshape, np.transpose,
              np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims, np.broadcast_to, np.concatenate,
              np.stack, np.repeat, np.tile, np.linalg.norm, np.copy, (np.add, "at")]
    assert [f for f in listed if kind_of(f) != "differentiable"] == []
    for f in (np.shape, np.ndim, np.size, np.zeros_like, np.ones_like, np.argmax, np.isfinite, np.greater):
        assert kind_of(f) == "passthrough"
    for f in (np.sign, np.floor, np.ceil, np.round):
        assert kind_of(f) == "constant"
    for f in (np.linalg.svd, np.linalg.inv, np.linalg.eigvals, np.linalg.eig, np.fft.fft, np.fft.irfft):
        assert kind_of(f) == "differentiable"
    for f in (np.nanquantile, np.nanmedian):  # no rule: computed plainly, reported
        assert kind_of(f) == "untraceable"


def test_constant_and_passthrough_calls_return_plain_values():
    def f(x):
        assert np.shape(x) == (3, 4) and x.ndim == 2 and len(x) == 3 and x.size == 12
        s = np.sign(x)
        assert type(s) is np.ndarray and type(np.zeros_like(x)) is np.ndarray
        assert type(x > 0) is np.ndarray and type(np.argmax(x, axis=1)) is np.ndarray
        assert type(np.floor(x)) is np.ndarray and type(np.round(x)) is np.ndarray
        assert type(x.astype(int)) is np.ndarray
        return np.sum(s * x + np.floor(x))

    t = check_against_numerics(f, {"x": X}, ["x"])
    np.testing.assert_allclose(t.gradient()["x"], np.sign(X))


def test_max_ties_share_the_derivative():
    t = trace(lambda x: np.max(x), {"x": np.array([1.0, 3.0, 3.0, 2.0])}, ["x"])
    np.testing.assert_allclose(t.gradient()["x"], [0, 0.5, 0.5, 0])


def test_prod_at_zero_is_the_product_of_the_others():
    t = trace(lambda x: np.prod(x), {"x": np.array([2.0, 0.0, 3.0])}, ["x"])
    np.testing.assert_allclose(t.gradient()["x"], [0.0, 6.0, 0.0])


def test_float32_stays_float32():
    x = X.astype(np.float32)
    t = trace(lambda x: np.tanh(x @ x.T).sum(axis=1), {"x": x}, ["x"])
    assert t.value.dtype == np.float32
    assert t.vjp(np.ones(3, np.float32))["x"].dtype == np.float32
    assert t.jvp({"x": np.ones_like(x)}).dtype == np.float32


def test_complex_holomorphic_jvp_matches_complex_differences():
    z = X + 1j * Y

    def f(z):
        return np.sum(np.exp(z) * np.sin(z @ z.T[:, :1]), axis=1)

    t = check_transpose(f, {"z": z}, ["z"])
    u = np.random.default_rng(3).normal(size=z.shape) + 1j * np.random.default_rng(4).normal(size=z.shape)
    h = 1e-6
    fd = (f(z + h * u) - f(z - h * u)) / (2 * h)
    np.testing.assert_allclose(t.jvp({"z": u}), fd, rtol=1e-6)


def test_long_chain_has_no_recursion():
    def f(x):
        for _ in range(20000):
            x = x * 0.9999 + 0.0001
        return x

    t = trace(f, {"x": np.array(2.0)}, ["x"])
    assert np.isclose(t.gradient()["x"], 0.9999 ** 20000)
    assert np.isclose(t.jvp({"x": 1.0}), 0.9999 ** 20000)


def test_std_over_an_axis_of_one_element_is_identically_zero():
    # std of a single element is 0 whatever the element: gradient 0, where d sqrt(var) is 0/0
    x = np.arange(3.0).reshape(3, 1)
    t = trace(lambda x: np.sum(np.std(x, axis=1)), {"x": x}, ["x"])
    assert t.ok and np.array_equal(t.vjp(np.ones(()))["x"], np.zeros_like(x))
    assert t.jvp({"x": np.ones_like(x)}) == 0.0


@pytest.mark.parametrize("fn, x, want", [
    (lambda x: np.sum(x ** 0.0), np.array([0.0, 2.0]), [0.0, 0.0]),       # x**0 is 1: slope 0, also at 0
    (lambda y: np.sum(0.0 ** y), np.array([0.3, 2.0]), [0.0, 0.0]),       # 0**y is 0 for y > 0
    (lambda y: np.sum(np.power(2.0, y)), np.array([0.5]), [2 ** 0.5 * np.log(2)]),
])
def test_powers_at_zero_have_their_derivative_not_nan(fn, x, want):
    t = trace(fn, {"x" if fn.__code__.co_varnames[0] == "x" else "y": x}, [fn.__code__.co_varnames[0]])
    g = t.vjp(np.ones(()))[fn.__code__.co_varnames[0]]
    np.testing.assert_allclose(g, want, rtol=1e-15)


def test_sign_of_a_complex_value_is_z_over_its_modulus_not_a_constant():
    # sign(z) = z/|z| moves with z's angle: traced as that quotient, refused at 0
    def f(a, b):
        s = np.sign(a + 1j * b)
        return np.sum(np.real(s) * np.array([1.0, 2.0]) + np.imag(s))
    check_against_numerics(f, {"a": np.array([1.0, -2.0]), "b": np.array([0.5, 1.5])}, ["a", "b"])
    t = trace(lambda a: np.sum(np.real(np.sign(a * 1j))), {"a": np.array([0.0, 1.0])}, ["a"])
    assert not t.ok and any("np.sign (complex input at 0)" in p for p in t.problems)
    t = trace(lambda x: np.sum(np.sign(x) * x), {"x": np.array([1.0, -2.0])}, ["x"])
    assert t.ok and np.array_equal(t.vjp(np.ones(()))["x"], [1.0, -1.0])
