"""scipy.special's hypergeometric, Box-Cox, entropy, Owen's T, Pochhammer, scaled Bessel, log-gamma,
Dawson, sine/cosine and Fresnel integrals and zeta under tracing: every traced partial against mpmath's
central differences of the function itself at 50 digits, over ranges that reach their edge regions."""
from __future__ import annotations

import mpmath
import numpy as np
import pytest
from mp_helpers import mp_derivative
from trace_helpers import check_transpose

from gradcli.trace import trace

sc = pytest.importorskip("scipy.special")


def traced_partials(f, args: dict):
    """d f / d each input, elementwise, from the traced jvp with a unit tangent in that input alone;
    also the transpose identity of the two sweeps."""
    t = trace(f, args, list(args))
    assert t.ok, t.problems
    np.testing.assert_allclose(t.value, f(**args), rtol=1e-15, atol=0)
    check_transpose(f, args, list(args))
    return {n: t.jvp({n: np.ones_like(v)}) for n, v in args.items()}


def mp_partial(g, args: dict, name):
    """The same partial of the mpmath function ``g(**args)`` by differences, element by element."""
    names = list(args)
    flat = np.broadcast_arrays(*[np.asarray(args[n], float) for n in names])
    out = []
    for k in range(flat[0].size):
        point = {n: a.flat[k] for n, a in zip(names, flat)}
        out.append(mp_derivative(lambda v, p=point: g(**{**{n: mpmath.mpf(x) for n, x in p.items()}, name: v}),
                                 point[name])[()])
    return np.array(out).reshape(flat[0].shape)


def assert_partials(f, g, args, rtol=1e-9, names=None):
    got = traced_partials(f, args)
    for n in names or args:
        want = mp_partial(g, args, n)
        np.testing.assert_allclose(got[n], want, rtol=rtol, atol=rtol * 1e-3, err_msg=n)


def grid(*axes):
    return [a.ravel() for a in np.meshgrid(*[np.asarray(x, float) for x in axes])]


def test_hyp2f1_in_z():
    z = np.array([-20.0, -3.0, -0.9, -1e-6, 0.0, 0.3, 0.75, 0.97])
    for a, b, c in [(1.5, 0.5, 2.0), (-2.0, 3.5, 1.25), (0.3, -0.7, 3.3), (2.5, 1.5, 0.5)]:
        assert_partials(lambda z: sc.hyp2f1(a, b, c, z), lambda z: mpmath.hyp2f1(a, b, c, z), {"z": z}, 1e-8)


def test_hyp1f1_in_x():
    x = np.array([-30.0, -5.0, -0.5, 0.0, 1e-7, 0.8, 4.0, 25.0])
    for a, b in [(1.5, 2.5), (-1.5, 0.75), (0.2, 3.0), (3.0, 0.4)]:
        assert_partials(lambda x: sc.hyp1f1(a, b, x), lambda x: mpmath.hyp1f1(a, b, x), {"x": x}, 1e-8)


def _boxcox(x, lmbda):
    return mpmath.log(x) if lmbda == 0 else (x ** lmbda - 1) / lmbda


@pytest.mark.parametrize("one_plus", [False, True], ids=["boxcox", "boxcox1p"])
def test_boxcox_in_x_and_lambda(one_plus):
    xs = [0.01, 0.5, 0.999, 1.0, 1.7, 40.0]
    x, lmbda = grid([v - 1 for v in xs] if one_plus else xs, [-2.5, -0.3, -1e-3, -1e-9, 0.0, 1e-7, 0.2, 1.0, 3.0])
    f = sc.boxcox1p if one_plus else sc.boxcox
    assert_partials(lambda x, lmbda: f(x, lmbda),
                    lambda x, lmbda: _boxcox(1 + x if one_plus else x, lmbda), {"x": x, "lmbda": lmbda})


def test_boxcox_at_x_zero_in_lambda():
    t = trace(lambda lmbda: sc.boxcox(0.0, lmbda), {"lmbda": np.array([0.5, 2.0])}, ["lmbda"])
    np.testing.assert_allclose(t.jvp({"lmbda": np.ones(2)}), [4.0, 0.25])  # boxcox(0, l) = -1/l


def test_kl_div_and_rel_entr():
    x, y = grid([1e-8, 0.3, 1.0, 7.0], [1e-6, 0.5, 1.0, 9.0])
    kl = lambda x, y: x * mpmath.log(x / y) - x + y  # noqa: E731
    assert_partials(lambda x, y: sc.kl_div(x, y), kl, {"x": x, "y": y})
    assert_partials(lambda x, y: sc.rel_entr(x, y), lambda x, y: x * mpmath.log(x / y), {"x": x, "y": y})
    # at x = 0 the value is y (kl_div) or 0 (rel_entr) for every y: slopes 1 and 0 in y
    for f, slope in ((sc.kl_div, 1.0), (sc.rel_entr, 0.0)):
        t = trace(lambda y: f(0.0, y), {"y": np.array([0.0, 0.4])}, ["y"])
        np.testing.assert_array_equal(t.jvp({"y": np.ones(2)}), [slope, slope])


def _owens_t(h, a):
    return mpmath.quad(lambda t: mpmath.exp(-h * h * (1 + t * t) / 2) / (1 + t * t), [0, a]) / (2 * mpmath.pi)


def test_owens_t():
    h, a = grid([-4.0, -0.7, 0.0, 1e-6, 0.5, 2.5], [-3.0, -0.4, 0.0, 0.9, 6.0])
    got = traced_partials(lambda h, a: sc.owens_t(h, a), {"h": h, "a": a})
    for n in ("h", "a"):
        with mpmath.workdps(40):  # quad to 40 digits: differences with a step of 1e-12 keep 20 of them
            want = [float(mpmath.diff(lambda v: _owens_t(*((v, mpmath.mpf(aa)) if n == "h" else (mpmath.mpf(hh), v))),
                                      mpmath.mpf(hh if n == "h" else aa), h=mpmath.mpf("1e-12")))
                    for hh, aa in zip(h, a)]
        np.testing.assert_allclose(got[n], want, rtol=1e-9, atol=1e-14, err_msg=n)


def test_poch():
    z, m = grid([-3.5, -0.25, 0.5, 1.0, 4.2], [-2.3, -0.45, 0.0, 1.3, 3.1])  # z + m off the poles
    assert_partials(lambda z, m: sc.poch(z, m), lambda z, m: mpmath.rf(z, m), {"z": z, "m": m})


def test_poch_at_a_pole_is_refused():
    t = trace(lambda z: sc.poch(z, 1.5), {"z": np.array([-2.0, 0.5])}, ["z"])
    assert not t.ok and "pole" in t.problems[0]


def test_scaled_bessel():
    x = np.array([-60.0, -3.0, -0.2, -1e-9, 1e-9, 0.01, 1.0, 8.0, 700.0])
    assert_partials(lambda x: sc.i0e(x), lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(0, x), {"x": x})
    x1 = np.append(x, 0.0)  # i1e has a derivative at 0 (1/2); i0e a kink
    assert_partials(lambda x: sc.i1e(x), lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(1, x), {"x": x1})
    assert np.isnan(trace(lambda x: sc.i0e(x), {"x": np.array([0.0])}, ["x"]).jvp({"x": np.ones(1)})[0])


def test_loggamma_and_dawsn():
    x = np.array([1e-6, 0.01, 0.5, 1.0, 2.7, 30.0, 1e4])
    assert_partials(lambda x: sc.loggamma(x), mpmath.loggamma, {"x": x})
    d = np.array([-40.0, -3.0, -0.9, 0.0, 1e-8, 0.5, 1.5, 12.0, 1e3])
    assert_partials(lambda x: sc.dawsn(x),
                    lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x), {"x": d})


def test_loggamma_and_dawsn_complex_are_holomorphic():
    z = np.array([0.5 + 1.0j, -2.5 + 0.3j, 3.0 - 4.0j])
    for f, g in ((sc.loggamma, mpmath.loggamma),
                 (sc.dawsn, lambda v: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-v * v) * mpmath.erfi(v))):
        t = trace(lambda z: f(z), {"z": z}, ["z"])
        with mpmath.workdps(40):
            want = [complex(mpmath.diff(g, mpmath.mpc(complex(v)))) for v in z]
        np.testing.assert_allclose(t.jvp({"z": np.ones_like(z)}), want, rtol=1e-12)


def test_sici_and_fresnel():
    x = np.array([-25.0, -2.0, -1e-8, 0.0, 1e-8, 0.3, 1.0, 9.5, 80.0])
    si = traced_partials(lambda x: sc.sici(x)[0], {"x": x})["x"]
    np.testing.assert_allclose(si, mp_derivative(mpmath.si, x), rtol=1e-12)
    nz = x[x != 0]  # Ci(0) = -inf; scipy's Ci(x < 0) is the real part, Ci(|x|)
    ci = traced_partials(lambda x: sc.sici(x)[1], {"x": nz})["x"]
    np.testing.assert_allclose(ci, mp_derivative(lambda v: mpmath.ci(abs(v)), nz), rtol=1e-12)
    for k, g in ((0, mpmath.fresnels), (1, mpmath.fresnelc)):
        got = traced_partials(lambda x, k=k: sc.fresnel(x)[k], {"x": x / 4})["x"]
        np.testing.assert_allclose(got, mp_derivative(g, x / 4), rtol=1e-10, atol=1e-12)


def test_zeta_in_x_and_q():
    s, q = grid([1.05, 1.5, 2.0, 4.5, 12.0], [0.05, 0.5, 1.0, 3.7, 40.0])
    assert_partials(lambda x, q: sc.zeta(x, q), lambda x, q: mpmath.zeta(x, q), {"x": s, "q": q})
    riemann = np.array([-7.5, -2.0, 0.0, 0.5, 0.99, 1.01, 3.0, 30.0])
    assert_partials(lambda x: sc.zeta(x), lambda x: mpmath.zeta(x), {"x": riemann})


def test_hyp2f1_beyond_its_branch_point_is_refused():
    t = trace(lambda z: sc.hyp2f1(1.5, 0.5, 2.0, z), {"z": np.array([0.5, 1.2])}, ["z"])
    assert not t.ok and "branch cut" in t.problems[0]
    t = trace(lambda c: sc.hyp2f1(1.5, 0.5, c, np.array([0.5, 1.2])), {"c": np.array([2.0, 2.5])}, ["c"])
    assert not t.ok and "branch cut" in t.problems[0]
