"""np.fft: the gradient tests of HIPS autograd's test_fft as autodiff-only checks. A transform's output
is complex, so each case returns real numbers made from it (its real and imaginary parts stacked, or
a power spectrum): the derivative runs through complex intermediates from real inputs."""
import numpy as np

import gradcli
from suite_helpers import named, parts


def case(name, fn, **spec):
    gradcli.check(**spec)(named(fn, name))


def of(f, **kw):
    return lambda x: parts(f(x, **kw))


# order=2 where autograd's FFT tests take the derivative of the gradient too
for fname in ("fft", "ifft"):
    f = getattr(np.fft, fname)
    case(fname, of(f), x=(5, 5), order=2)
    case(f"{fname}_axis0", of(f, axis=0), x=(5, 5), order=2)
    case(f"{fname}_n_smaller", of(f, n=3), x=(5, 5), order=2)
    case(f"{fname}_n_bigger", of(f, n=7), x=(5, 5), order=2)
    case(f"{fname}_ortho", of(f, norm="ortho"), x=(6,))
    case(f"{fname}_forward", of(f, norm="forward"), x=(6,))
for fname in ("fft2", "ifft2", "fftn", "ifftn"):
    f = getattr(np.fft, fname)
    case(fname, of(f), x=(4, 5), order=2)
    case(f"{fname}_s", of(f, s=[7, 3], axes=[0, 2]), x=(5, 3, 5), order=2)
    case(f"{fname}_3d_default_axes", of(f), x=(2, 3, 4))
case("fftn_one_axis", of(np.fft.fftn, axes=(1,)), x=(3, 4))
for fname in ("rfft", "rfft2", "rfftn"):
    f = getattr(np.fft, fname)
    case(fname, of(f), x=(4, 6))
    case(f"{fname}_odd", of(f), x=(3, 5))
case("rfft_n_axis0", of(np.fft.rfft, n=7, axis=0), x=(5, 3))
case("rfftn_s", of(np.fft.rfftn, s=(3, 8), axes=(0, 1)), x=(4, 6))


def inverse_real(f, **kw):
    # the inverse of a real transform takes a Hermitian half-spectrum, here built from two real inputs
    return lambda a, b: f(a + 1j * b, **kw)


for fname in ("irfft", "irfft2", "irfftn"):
    f = getattr(np.fft, fname)
    case(fname, inverse_real(f), a=(3, 4), b=(3, 4))
case("irfft_n_odd", inverse_real(np.fft.irfft, n=7), a=(2, 4), b=(2, 4))
case("irfft_axis0", inverse_real(np.fft.irfft, axis=0), a=(4, 3), b=(4, 3))
case("irfftn_s", inverse_real(np.fft.irfftn, s=(3, 6)), a=(3, 4), b=(3, 4))
case("hfft", inverse_real(np.fft.hfft), a=(5,), b=(5,))
case("hfft_n", inverse_real(np.fft.hfft, n=6), a=(2, 4), b=(2, 4))
case("ihfft", of(np.fft.ihfft), x=(6,))
case("ihfft_odd", of(np.fft.ihfft), x=(2, 5))
for fname in ("fftshift", "ifftshift"):
    f = getattr(np.fft, fname)
    case(fname, lambda x, f=f: f(x), x=(5, 5), order=2)
    case(f"{fname}_even", lambda x, f=f: f(x), x=(4, 4), order=2)
    case(f"{fname}_axes", lambda x, f=f: f(x, axes=1), x=(5, 5), order=2)
case("fftshift_of_spectrum", lambda x: np.abs(np.fft.fftshift(np.fft.fft(x))), x=(6,))
case("power_spectrum", lambda x: np.abs(np.fft.fft(x)) ** 2, x=(8,))
case("power_spectrum_sum", lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2), x=(7,))
case("roundtrip", lambda x: np.real(np.fft.ifft(np.fft.fft(x) * np.exp(-np.arange(6.0)))), x=(6,))
case("convolution_by_fft", lambda a, b: np.fft.irfft(np.fft.rfft(a) * np.fft.rfft(b), n=8), a=(8,), b=(8,))
case("phase_spectrum", lambda x: np.angle(np.fft.fft(x)[1:4]), x=(7,))
case("spectrum_of_complex_signal", lambda a, b: parts(np.fft.fft2(a + 1j * b)), a=(3, 4), b=(3, 4))
