"""scipy.integrate.odeint in the tracer: forward sensitivities in y0 and args against closed forms (decay,
a linear system's matrix exponential, logistic growth) and central differences of odeint itself, the
options passed through, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

si = pytest.importorskip("scipy.integrate")
sl = pytest.importorskip("scipy.linalg")

from scipy.integrate import odeint  # noqa: E402  a model file's from-import
from trace_helpers import check_against_numerics, check_transpose, close  # noqa: E402

from gradcli.trace import kind_of, trace  # noqa: E402

ORIGINAL = si.odeint
T = np.linspace(0.0, 2.0, 6)
TIGHT = dict(rtol=1e-10, atol=1e-10)
A = np.array([[-0.5, 1.2], [-0.8, -0.3]])


def decay(y, t, k):
    return -k * y


def linear(y, t, a):
    return a @ y


def logistic(y, t, r, cap):
    return r * y * (1 - y / cap)


def pendulum(y, t, b, c):  # scipy's own example: a list of traced scalars
    theta, omega = y
    return [omega, -b * omega - c * np.sin(theta)]


def refused(fn, inputs, wrt, why):
    t = trace(fn, inputs, wrt)
    assert not t.ok
    assert any("scipy.integrate.odeint" in p and why in p for p in t.problems), t.problems
    return t


# --- closed forms -------------------------------------------------------------------------------------
@pytest.mark.parametrize("y0, k", [(np.array([1.5]), 0.7), (np.array([1.0, -2.0, 0.5]), 0.4),
                                   (np.array([1.0, -2.0, 0.5]), np.array([0.3, 1.1, 2.0]))],
                         ids=["scalar", "vector", "per-component-k"])
def test_decay_closed_form(y0, k):
    tr = trace(lambda y0, k: odeint(decay, y0, T, args=(k,), **TIGHT), {"y0": y0, "k": k}, ["y0", "k"])
    assert tr.ok, tr.problems
    e = np.exp(-np.multiply.outer(T, np.broadcast_to(k, y0.shape)))  # (len(t), n)
    close(tr.value, y0 * e, 1e-8)
    rng = np.random.default_rng(0)
    g = rng.normal(size=tr.value.shape)
    back = tr.vjp(g)
    close(back["y0"], np.sum(g * e, axis=0), 1e-7)
    dk = -T[:, None] * y0 * e  # d y_i / d k_i
    close(back["k"], np.sum(g * dk) if np.ndim(k) == 0 else np.sum(g * dk, axis=0), 1e-7)
    u = {"y0": rng.normal(size=y0.shape), "k": rng.normal(size=np.shape(k))}
    close(tr.jvp(u), e * u["y0"] + dk * u["k"], 1e-7)


def test_decay_value_is_scipys_and_y0_plain():
    y0 = np.array([2.0, 1.0])
    tr = trace(lambda k: odeint(decay, y0, T, args=(k,)), {"k": 0.9}, ["k"])
    assert tr.ok, tr.problems
    np.testing.assert_array_equal(tr.value, ORIGINAL(decay, y0, T, args=(0.9,)))
    # the default tolerances for the value, tighter ones for the sensitivities
    close(tr.vjp(np.ones_like(tr.value))["k"], np.sum(-T[:, None] * y0 * np.exp(-0.9 * T)[:, None]), 1e-7)


def test_linear_system_matrix_exponential():
    y0 = np.array([1.0, -0.5])
    tr = trace(lambda y0, a: odeint(linear, y0, T, args=(a,), **TIGHT), {"y0": y0, "a": A}, ["y0", "a"])
    assert tr.ok, tr.problems
    close(tr.value, np.stack([sl.expm(A * s) @ y0 for s in T]), 1e-8)
    rng = np.random.default_rng(1)
    u0, ua = rng.normal(size=2), rng.normal(size=(2, 2))
    # d/da expm(a s) y0 [E] = L(a s, E s) y0, the Frechet derivative
    want = np.stack([sl.expm(A * s) @ u0 + sl.expm_frechet(A * s, ua * s, compute_expm=False) @ y0
                     for s in T])
    close(tr.jvp({"y0": u0, "a": ua}), want, 1e-7)
    g = rng.normal(size=tr.value.shape)
    back = tr.vjp(g)
    close(back["y0"], sum(sl.expm(A * s).T @ gk for s, gk in zip(T, g)), 1e-7)
    # the adjoint of L(a s, .) is L((a s)^T, .)
    close(back["a"], sum(s * sl.expm_frechet((A * s).T, np.outer(gk, y0), compute_expm=False)
                         for s, gk in zip(T, g)), 1e-7)


def test_logistic_closed_form():
    def model(y0, r, cap):
        return odeint(logistic, y0, T, args=(r, cap), **TIGHT)

    y0, r, cap = np.array([0.2]), 1.3, 2.5
    tr = trace(model, {"y0": y0, "r": r, "cap": cap}, ["y0", "r", "cap"])
    assert tr.ok, tr.problems
    exact = lambda y0, r, cap: cap * y0 / (y0 + (cap - y0) * np.exp(-r * T[:, None]))  # noqa: E731
    close(tr.value, exact(y0, r, cap), 1e-8)
    h, back = 1e-6, tr.vjp(np.ones_like(tr.value))
    close(back["r"], np.sum(exact(y0, r + h, cap) - exact(y0, r - h, cap)) / (2 * h), 1e-6)
    close(back["cap"], np.sum(exact(y0, r, cap + h) - exact(y0, r, cap - h)) / (2 * h), 1e-6)


# --- against central differences of odeint itself ------------------------------------------------------
def test_pendulum_against_numerics():
    def model(y0, b, c):
        return odeint(pendulum, y0, np.linspace(0, 3, 7), args=(b, c), **TIGHT)

    inputs = {"y0": np.array([np.pi - 0.1, 0.0]), "b": 0.25, "c": 5.0}
    check_against_numerics(model, inputs, ["y0", "b", "c"], rtol=1e-5)
    check_transpose(model, inputs, ["y0", "b", "c"])


def test_options_pass_through_tfirst_hmax_array_atol():
    def model(y0, r):
        return odeint(lambda t, y, r, cap: logistic(y, t, r, cap), y0, T, args=(r, 3.0), tfirst=True,
                      hmax=0.05, rtol=1e-10, atol=np.array([1e-10, 1e-11]))

    check_against_numerics(model, {"y0": np.array([0.3, 1.0]), "r": np.array([0.8, -0.4])}, ["y0", "r"],
                           rtol=1e-5)


def test_y0_as_list_of_traced_and_traced_passed_twice():
    def model(a, k):  # a is y0's first element and the decay rate of the second
        return odeint(lambda y, t, a, k: np.stack([-k * y[0], -a * y[1]]), [a, k], T, args=(a, k), **TIGHT)

    t = check_against_numerics(model, {"a": 0.6, "k": 1.4}, ["a", "k"], rtol=1e-5)
    assert t.value.shape == (len(T), 2)


def test_rhs_independent_of_y_and_args():
    tr = trace(lambda y0: odeint(lambda y, t: np.ones(2), y0, T), {"y0": np.array([1.0, 2.0])}, ["y0"])
    assert tr.ok, tr.problems
    close(tr.value, np.array([1.0, 2.0]) + T[:, None], 1e-8)
    close(tr.vjp(np.ones_like(tr.value))["y0"], np.full(2, len(T)), 1e-9)


def test_inside_a_larger_model():
    def loss(k):
        y = odeint(decay, np.array([1.0, 2.0]), T, args=(k,), **TIGHT)
        return np.sum((y - 0.5) ** 2)

    check_against_numerics(loss, {"k": 0.8}, ["k"], rtol=1e-5)


# --- refusals and bookkeeping ----------------------------------------------------------------------------
def test_refuses_traced_t():
    refused(lambda t: odeint(decay, np.array([1.0]), t, args=(0.5,)), {"t": T}, ["t"], "traced t")


@pytest.mark.parametrize("kw, why", [({"Dfun": lambda y, t, k: -k * np.eye(1)}, "Dfun="),
                                     ({"ml": 0, "mu": 0}, "ml="), ({"full_output": True}, "full_output")])
def test_refuses_options(kw, why):
    refused(lambda k: odeint(decay, np.array([1.0]), T, args=(k,), **kw), {"k": 0.5}, ["k"], why)


def test_refuses_func_with_a_cut():
    def cutting(y, t, k):
        return -float(k) * y

    refused(lambda k: odeint(cutting, np.array([1.0]), T, args=(k,)), {"k": 0.5}, ["k"], "float()")


def test_refuses_func_with_an_untraceable_call():
    if kind_of(np.nextafter) != "untraceable":
        pytest.skip("np.nextafter is traced now")

    def odd(y, t, k):
        return -k * np.nextafter(y, np.inf)

    refused(lambda k: odeint(odd, np.array([1.0]), T, args=(k,)), {"k": 0.5}, ["k"], "np.nextafter")


def test_refuses_traced_arg_in_a_container_and_a_failed_solve():
    refused(lambda k: odeint(lambda y, t, ks: -ks[0] * y, np.array([1.0]), T, args=([k],)), {"k": 0.5},
            ["k"], "inside a container")
    with pytest.warns(si.ODEintWarning):
        refused(lambda k: odeint(decay, np.array([1.0]), T * 100, args=(k,), mxstep=1), {"k": 0.5}, ["k"],
                "did not succeed")


def test_registered_and_restored():
    assert kind_of(ORIGINAL) == "differentiable"
    assert si.odeint is ORIGINAL and odeint is ORIGINAL


def test_scalar_y0_no_args_and_one_time():
    tr = trace(lambda y0: odeint(lambda y, t: -0.5 * y ** 3, y0, T, **TIGHT), {"y0": 1.2}, ["y0"])
    assert tr.ok and tr.value.shape == (len(T), 1), tr.problems
    exact = lambda y0: y0 / np.sqrt(1 + y0 ** 2 * T)  # noqa: E731  y' = -y^3 / 2
    close(tr.value[:, 0], exact(1.2), 1e-8)
    close(tr.jvp({"y0": 1.0})[:, 0], (1 + 1.2 ** 2 * T) ** -1.5, 1e-7)
    one = trace(lambda y0: odeint(decay, y0, [0.0], args=(2.0,)), {"y0": np.array([3.0])}, ["y0"])
    assert one.ok and one.value.shape == (1, 1)
    close(one.vjp(np.ones((1, 1)))["y0"], [1.0], 1e-12)
