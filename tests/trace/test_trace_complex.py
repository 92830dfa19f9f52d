"""Complex values in the tracer, and np.fft: every rule against central differences of real inputs.

The convention (PyTorch's, stated in gradcli/trace/linear.py): the cotangent of a complex z is
dL/dRe(z) + i dL/dIm(z) for the real loss L = Re(sum(conj(v) * f)); the references below are central
differences along the real and the imaginary part of every input element, combined that way. The
transpose identity tested is Re<u, vjp(v)> = Re<jvp(u), v> with <a, b> = sum(conj(a) * b).
"""
from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import check_against_numerics

from gradcli.trace import trace
from gradcli.trace.rules import elementwise_rules

rng = np.random.default_rng(7)
X, Y = rng.normal(size=6), rng.normal(size=6)
Z = X + 1j * Y
A = rng.normal(size=(2, 3, 4))
B = A + 1j * rng.normal(size=A.shape)
M = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))


def _random(shape, complex_, r):
    v = r.normal(size=shape)
    return v + 1j * r.normal(size=shape) if complex_ else v


def partial_columns(fn, inputs, name, h=1e-6):
    """Central differences of fn along each element's real part (and imaginary part, if complex)."""
    x = np.asarray(inputs[name])
    dirs = (1.0, 1j) if np.iscomplexobj(x) else (1.0,)
    cols = {d: [] for d in dirs}
    for k in range(x.size):
        for d in dirs:
            xp, xm = x.astype(complex if d == 1j else x.dtype), x.astype(complex if d == 1j else x.dtype)
            xp.flat[k] += h * d
            xm.flat[k] -= h * d
            fp, fm = np.asarray(fn(**{**inputs, name: xp})), np.asarray(fn(**{**inputs, name: xm}))
            cols[d].append(((fp - fm) / (2 * h)).ravel())
    return [np.stack(cols[d], axis=1) for d in dirs]


def check_complex(fn, inputs, wrt, rtol=1e-6, seed=0):
    """vjp and jvp of the trace against the convention applied to central differences; the traced
    value is the plain one; a real input's cotangent is real."""
    t = trace(fn, inputs, wrt)
    assert t.ok, t.problems
    plain = np.asarray(fn(**inputs))
    np.testing.assert_allclose(t.value, plain, rtol=1e-13, atol=1e-300)
    r = np.random.default_rng(seed)
    v = _random(plain.shape, np.iscomplexobj(plain), r)
    back, u, want_fwd = t.vjp(v), {}, 0
    for n in wrt:
        x = np.asarray(inputs[n])
        cols = partial_columns(fn, inputs, n)
        # dL/dRe + i dL/dIm of L = Re(sum(conj(v) * f))
        want = sum(d * np.real(np.conj(v).ravel() @ J) for d, J in zip((1.0, 1j), cols))
        assert back[n].shape == x.shape and back[n].dtype.kind == x.dtype.kind, (back[n].dtype, x.dtype)
        close(back[n].ravel(), want, rtol)
        u[n] = _random(x.shape, np.iscomplexobj(x), r)
        parts = (u[n].real, u[n].imag) if np.iscomplexobj(x) else (u[n],)
        want_fwd = want_fwd + sum(J @ p.ravel() for J, p in zip(cols, parts))
    fwd = t.jvp(u)
    assert fwd.shape == plain.shape and fwd.dtype.kind == plain.dtype.kind
    close(fwd.ravel(), want_fwd, rtol)
    return t


def close(got, want, rtol=1e-6):
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def check_transpose_re(fn, inputs, wrt, seeds=range(2)):
    """Re<u, vjp(v)> = Re<jvp(u), v> (the real inner product under which vjp is jvp's adjoint)."""
    t = trace(fn, inputs, wrt)
    assert t.ok, t.problems
    for seed in seeds:
        r = np.random.default_rng(seed)
        v = _random(t.value.shape, np.iscomplexobj(t.value), r)
        u = {n: _random(np.shape(inputs[n]), np.iscomplexobj(inputs[n]), r) for n in wrt}
        back = t.vjp(v)
        lhs = np.real(sum(np.sum(np.conj(u[n]) * back[n]) for n in wrt))
        rhs = np.real(np.sum(np.conj(t.jvp(u)) * v))
        assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs), abs(rhs)), (lhs, rhs)


# --- the sign of d/dy through a complex intermediate --------------------------------------------------
def test_abs_of_x_plus_iy_has_the_right_sign_in_y():
    t = check_against_numerics(lambda x, y: np.sum(np.abs(x + 1j * y)), {"x": X, "y": Y}, ["x", "y"])
    g = t.gradient()
    np.testing.assert_allclose(g["y"], Y / np.abs(Z), rtol=1e-12)  # the closed form
    np.testing.assert_allclose(g["x"], X / np.abs(Z), rtol=1e-12)
    assert g["x"].dtype == g["y"].dtype == np.float64
    check_against_numerics(lambda x, y: np.abs(x[:, None] + 1j * y), {"x": X[:3], "y": Y}, ["x", "y"])


@pytest.mark.parametrize("fn", [
    lambda x, y: np.var(x + 1j * y), lambda x, y: np.std(x + 1j * y),
    lambda x, y: np.var((x + 1j * y).reshape(2, 3), axis=0, ddof=1),
    lambda x, y: np.std((x + 1j * y).reshape(2, 3), axis=0), lambda x, y: np.std(x * 1j - y, keepdims=True),
    lambda x, y: np.var((x + 1j * y).reshape(3, 2), axis=1, correction=1, keepdims=True),
], ids=["var", "std", "var-axis-ddof", "std-axis0", "std-keepdims", "var-correction"])
def test_var_and_std_of_complex_arrays(fn):
    check_against_numerics(fn, {"x": X, "y": Y}, ["x", "y"])


def test_var_of_a_complex_input_is_its_gradient():
    t = check_complex(lambda z: np.var(z), {"z": Z}, ["z"])
    np.testing.assert_allclose(t.gradient()["z"], 2 * (Z - Z.mean()) / Z.size, rtol=1e-12)
    check_complex(lambda z: np.std(z, axis=0), {"z": M}, ["z"])


# --- elementwise ---------------------------------------------------------------------------------
def _complex_ufuncs():
    out = []
    for u in elementwise_rules():
        if isinstance(u, np.ufunc) and any("D" in ty.split("->")[0] for ty in u.types):
            out.append(u)
    return out


HOLOMORPHIC = [u for u in _complex_ufuncs() if u not in (np.absolute, np.maximum, np.minimum, np.fmax, np.fmin)]


def test_every_holomorphic_ufunc_on_complex_operands():
    z = np.array([0.3 + 0.4j, -0.5 + 0.2j, 0.7 - 0.6j])
    w = np.array([1.1 - 0.3j, 0.4 + 0.9j, -0.8 - 0.5j])
    assert len(HOLOMORPHIC) >= 25
    for u in HOLOMORPHIC:
        if u.nin == 1:
            check_complex(lambda z: u(z), {"z": z}, ["z"])
        else:
            check_complex(lambda z, w: u(z, w), {"z": z, "w": w}, ["z", "w"])


def test_mixed_real_and_complex_operands_broadcast():
    x, z = X[:4], M[:, :1]  # (4,) real against (3, 1) complex
    inputs = {"x": x + 2, "z": z}
    for fn in (np.multiply, np.divide, np.add, np.subtract, np.power, lambda a, b: b ** a):
        check_complex(lambda x, z: fn(x, z), inputs, ["x", "z"])
    check_complex(lambda x, z: 1j * x * z + 2j, inputs, ["x"])  # z a constant


def test_tanh_far_from_the_origin_keeps_finite_partials():
    z = np.array([400 + 1j, -800 + 0.5j, 0.2 - 0.3j])
    g = trace(lambda z: np.tanh(z), {"z": z}, ["z"]).vjp(np.ones(3))["z"]
    np.testing.assert_allclose(g, np.conj(1 / np.cosh(z[2]) ** 2) * np.array([0, 0, 1]), atol=1e-300)
    check_complex(lambda z: np.tanh(z) + np.arcsinh(z), {"z": z[2:] * [1, 3]}, ["z"])


def test_abs_of_complex():
    t = check_complex(lambda z: np.abs(z) + abs(z) ** 2, {"z": Z}, ["z"])
    np.testing.assert_allclose(t.vjp(np.ones(6))["z"], Z / np.abs(Z) + 2 * Z)
    # at 0, the kink: sign(0) = 0 as for the real |x|
    assert trace(lambda z: np.abs(z), {"z": np.array(0j)}, ["z"]).gradient()["z"] == 0


def test_real_imag_conj():
    def f(z):
        parts = np.real(z) * np.imag(z) ** 2 + z.real - 3 * z.imag
        return parts + np.conj(z) * z + np.conjugate(z) ** 2 + z.conj()

    check_complex(f, {"z": Z}, ["z"])
    t = trace(lambda z: np.sum(np.imag(z)), {"z": Z}, ["z"])
    np.testing.assert_allclose(t.gradient()["z"], 1j * np.ones(6))  # d/dIm, along +i
    # of real arrays: the array itself and a constant zero
    check_against_numerics(lambda x: np.real(x) * 2 + np.imag(x) + np.conj(x), {"x": X}, ["x"])


@pytest.mark.parametrize("deg", [False, True])
def test_angle(deg):
    t = check_complex(lambda z: np.angle(z, deg=deg), {"z": Z}, ["z"])
    c = 180 / np.pi if deg else 1.0
    np.testing.assert_allclose(t.vjp(np.ones(6))["z"], c * 1j * Z / np.abs(Z) ** 2, rtol=1e-12)
    check_against_numerics(lambda x, y: np.angle(x + 1j * y, deg), {"x": X, "y": Y}, ["x", "y"])
    # of a real array: 0 or pi, piecewise constant
    t = trace(lambda x: np.angle(x, deg) + x, {"x": X}, ["x"])
    assert t.ok and np.all(t.vjp(np.ones(6))["x"] == 1)


# --- reductions, contractions, selections --------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda z: np.sum(z, axis=0), lambda z: np.mean(z, axis=1, keepdims=True), lambda z: np.prod(z, axis=1),
    lambda z: np.prod(z), lambda z: np.cumsum(z, axis=1), lambda z: np.cumsum(z), lambda z: np.add.reduce(z),
    lambda z: np.multiply.reduce(z, axis=1), lambda z: np.add.accumulate(z, axis=0),
    lambda z: np.trace(z), lambda z: z.sum() * z.mean(),
], ids=["sum", "mean", "prod-axis", "prod", "cumsum-axis", "cumsum", "add.reduce", "multiply.reduce",
        "add.accumulate", "trace", "sum*mean"])
def test_reductions_of_complex(fn):
    check_complex(fn, {"z": M}, ["z"])


def test_real_inputs_promoted_by_dtype():
    x = X.reshape(2, 3)
    check_complex(lambda x: np.sum(x, axis=0, dtype=complex) * (1 + 2j), {"x": x}, ["x"])
    check_complex(lambda x: np.cumsum(x, dtype=complex) * 1j, {"x": x}, ["x"])
    check_complex(lambda x: np.mean(x, dtype=complex) * 1j, {"x": x}, ["x"])


W = rng.normal(size=(4, 2)) + 1j * rng.normal(size=(4, 2))
R = rng.normal(size=(4, 2))


@pytest.mark.parametrize("fn", [
    lambda m, w, r: m @ w, lambda m, w, r: m @ r, lambda m, w, r: np.matmul(m, w[:, 0]),
    lambda m, w, r: np.matmul(w[:, 0], w[:, 1]), lambda m, w, r: np.stack([m, m * 1j]) @ r,
    lambda m, w, r: np.dot(m, w), lambda m, w, r: np.dot(w[:, 0], r[:, 1]),
    lambda m, w, r: np.einsum("ij,jk->ik", m, w), lambda m, w, r: np.einsum("ij,ij->", w, r),
    lambda m, w, r: np.einsum("ii->", m[:, :3]), lambda m, w, r: np.tensordot(m, w, 1),
    lambda m, w, r: np.inner(m, m), lambda m, w, r: np.outer(w[:, 0], r[:, 1]),
], ids=["matmul", "matmul-real", "matvec", "vecvec", "batched", "dot", "dot-1d", "einsum", "einsum-full",
        "einsum-diag", "tensordot", "inner", "outer"])
def test_contractions_of_complex_and_real(fn):
    check_complex(fn, {"m": M, "w": W, "r": R}, ["m", "w", "r"])


def test_selections_and_gathers_mixing_real_and_complex():
    x = X[:4]
    z = M[0]

    def f(x, z):
        c = np.concatenate([x, z, x])  # real operands join a complex gather
        s = np.stack([x, z])[:, ::-1]
        p = np.pad(z, 1)[1:5] + np.roll(np.repeat(z, 2)[:4], 1) + np.take(np.flip(z), [0, 0, 3, 1])
        return np.sum(c * c) + np.where(x > 0, z, x) + s[1] * s[0] + p

    check_complex(f, {"x": x, "z": z}, ["x", "z"])

    def g(z, x):
        z = z.copy()  # np.add.at works in place: the differences must not see it accumulate
        np.add.at(z, [0, 0, 2], x[:3])
        return z * z

    check_complex(g, {"z": z, "x": x}, ["z", "x"])


# --- refused -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, call", [
    (lambda z: np.maximum(z, 0), "np.maximum (complex input)"),
    (lambda z: np.fmin(z, 1j), "np.fmin (complex input)"),
    (lambda z: np.max(z), "np.max (complex input)"), (lambda z: np.min(z, axis=0), "np.min (complex input)"),
    (lambda z: np.clip(z, 0, 1), "np.maximum (complex input)"),
    (lambda z: np.fft.fftn(z, axes=(0, 0)), "np.fft.fftn (repeated axes)"),
    (lambda z: np.fft.fft(z, out=np.empty(4, complex)), "np.fft.fft (out=)"),
    (lambda z: np.fft.hfft(z, out=np.empty(6)), "np.fft.hfft (out=)"),
])
def test_refused_calls_are_not_traceable(fn, call):
    with np.errstate(all="ignore"):
        t = trace(fn, {"z": M[:, :4] if "fftn" in call else M[0]}, ["z"])
    assert not t.ok
    assert any(p.startswith(call + " is not traceable") for p in t.problems), t.problems


# --- np.fft ------------------------------------------------------------------------------------------
NORMS = [None, "backward", "ortho", "forward"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 3, 6, 9])
def test_fft_ifft(n, norm):
    for f in (np.fft.fft, np.fft.ifft):
        check_complex(lambda z: f(z, n=n, norm=norm), {"z": Z}, ["z"])
        check_complex(lambda x: f(x, n, 0, norm), {"x": A[:, 1]}, ["x"])  # batched, axis 0, real input


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 1, 4, 5, 8, 9])
def test_rfft_irfft_hfft_ihfft(n, norm):
    # bins 0 and n/2 of a one-sided spectrum stand for one bin, the others for two
    check_complex(lambda x: np.fft.rfft(x, n=n, norm=norm), {"x": X}, ["x"])
    check_complex(lambda z: np.fft.irfft(z, n=n, norm=norm), {"z": Z}, ["z"])
    check_complex(lambda z: np.fft.hfft(z, n, norm=norm), {"z": Z}, ["z"])
    check_complex(lambda x: np.fft.ihfft(x, n=n, norm=norm), {"x": X}, ["x"])
    check_complex(lambda x: np.fft.irfft(x, n=n, axis=1, norm=norm), {"x": A}, ["x"])


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("s, axes", [(None, None), ((4, 6), (1, 2)), ((2, 3), (0, 2)), (None, (1,)),
                                     ((5,), (-3,)), ((1, 3), (2, 0))], ids=str)
def test_n_dimensional_transforms(s, axes, norm):
    for f in (np.fft.fftn, np.fft.ifftn):
        check_complex(lambda z: f(z, s, axes, norm), {"z": B}, ["z"])
    check_complex(lambda x: np.fft.rfftn(x, s=s, axes=axes, norm=norm), {"x": A}, ["x"])
    check_complex(lambda z: np.fft.irfftn(z, s=s, axes=axes, norm=norm), {"z": B}, ["z"])


def test_size_one_and_zero_dimensional_inputs():
    check_complex(lambda z: np.fft.fft(z) + np.fft.ifft(z, 3), {"z": Z[:1]}, ["z"])
    check_complex(lambda x: np.fft.rfft(x) * np.fft.irfft(x, 1), {"x": X[:1]}, ["x"])
    check_complex(lambda z: np.fft.fftn(z, axes=(0, 2)), {"z": B[:1, :, :1]}, ["z"])
    check_complex(lambda z: np.fft.fftn(z) * 2, {"z": np.array(1.5 - 2j)}, ["z"])  # no axes: the input


def test_two_dimensional_transforms():
    for f in (np.fft.fft2, np.fft.ifft2):
        check_complex(lambda z: f(z), {"z": B}, ["z"])
        check_complex(lambda z: f(z, s=(3, 2), axes=(0, 2), norm="ortho"), {"z": B}, ["z"])
    check_complex(lambda x: np.fft.rfft2(x), {"x": A}, ["x"])
    check_complex(lambda x: np.fft.rfft2(x, s=(2, 5), norm="forward"), {"x": A}, ["x"])
    check_complex(lambda z: np.fft.irfft2(z), {"z": B}, ["z"])
    check_complex(lambda z: np.fft.irfft2(z, s=(4, 7), axes=(0, 1)), {"z": B}, ["z"])


def test_shifts():
    def f(z):
        return np.fft.fftshift(z) * 2 + np.fft.ifftshift(z, axes=1) + np.fft.fftshift(np.fft.fft(z), axes=(0,))

    check_complex(f, {"z": M}, ["z"])
    check_complex(lambda x: np.fft.ifftshift(np.fft.fftshift(x, axes=-1)) * 3, {"x": A}, ["x"])


def test_power_spectrum_against_parseval():
    # sum |fft(x)|^2 = n sum x^2: the gradient is 2 n x
    t = check_against_numerics(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2), {"x": X}, ["x"])
    np.testing.assert_allclose(t.gradient()["x"], 2 * X.size * X, rtol=1e-12)
    check_against_numerics(lambda x: np.abs(np.fft.fft(x)) ** 2, {"x": X}, ["x"])
    check_against_numerics(lambda x: np.abs(np.fft.rfft(x, axis=1)) ** 2, {"x": A}, ["x"])


def test_a_real_loss_through_complex_arrays():
    def loss(x, y):
        z = x + 1j * y
        w = np.exp(1j * x) * z / (2 + np.conj(z))
        s = np.fft.ifft(np.fft.fftshift(w), norm="ortho")
        spectrum = np.abs(np.fft.rfft(np.real(s) * y, n=8)) ** 2
        return (np.sum(np.real(s * np.conj(s[::-1]))) + np.mean(np.angle(w + 3)) + np.var(z)
                + np.std(np.sqrt(z + 4).reshape(2, 3), axis=0).sum() + np.sum(spectrum) + np.abs(np.prod(z[:3])))

    t = check_against_numerics(loss, {"x": X, "y": Y}, ["x", "y"])
    assert all(v.dtype == np.float64 for v in t.gradient().values())


def test_sweeps_are_adjoint_under_the_real_inner_product():
    check_transpose_re(lambda z, r: np.fft.rfft(np.abs(np.fft.fft2(z)) @ r, 5) * z[0, 0], {"z": M, "r": R},
                       ["z", "r"])
    check_transpose_re(lambda z: np.fft.irfftn(np.conj(z) * np.angle(z), axes=(0, 2)), {"z": B}, ["z"])
    check_transpose_re(lambda z: np.var(z, axis=1) + np.imag(z @ z.T).sum(), {"z": M}, ["z"])


def test_float32_stays_single_precision():
    x = X.astype(np.float32)
    t = trace(lambda x: np.abs(np.fft.rfft(x)) ** 2, {"x": x}, ["x"])
    assert t.value.dtype == np.float32
    assert t.vjp(np.ones(t.value.shape, np.float32))["x"].dtype == np.float32
    z = Z.astype(np.complex64)
    t = trace(lambda z: np.fft.ifft(z), {"z": z}, ["z"])
    assert t.vjp(np.ones(6, np.complex64))["z"].dtype == np.complex64
