"""Differentiation rules for np.fft: the discrete Fourier transforms and the shifts.

The transforms are linear: the jvp is the same call on the tangent. The vjp is the adjoint under the
convention of :mod:`gradcli.trace.linear`, and the adjoint of the DFT matrix F is conj(F)^T, the
transform of the other direction with the dual normalisation (unscaled and 1/n swap, 1/sqrt(n) stays):
fft(x, norm=N)^H = ifft(., norm=dual(N)) and ifft^H likewise fft. numpy fits the input to ``n=``/``s=``
by cropping or zero-padding at the end; the adjoint zero-pads or crops back. The n-dimensional forms
are one-dimensional transforms along each axis, so their adjoints are too, in reverse order.
"""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import NotTraceable, Traced, record
from gradcli.trace.linear import for_parent
from gradcli.trace.structural import gather_rule

_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _fit(c, shape, axes):
    """``c`` cropped or zero-padded at the end of ``axes`` to the lengths ``shape`` has there."""
    for ax in axes:
        m, n = shape[ax], c.shape[ax]
        if n > m:
            c = c[(slice(None),) * ax + (slice(0, m),)]
        elif n < m:
            c = np.pad(c, [(0, m - n) if i == ax else (0, 0) for i in range(c.ndim)])
    return c


def _doubled(n, axis, g):
    """2 for the bins of a one-sided spectrum of length n that stand for two bins (k and n - k), 1 for
    bin 0 and, n even, the Nyquist bin n/2: shaped to broadcast along ``axis`` of ``g``, in its precision."""
    w = np.full(n // 2 + 1, 2.0, np.real(g).dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w.reshape([-1 if i == axis else 1 for i in range(g.ndim)])


def _adjoint(kind, g, axes, norm, n):
    """The adjoint of the transform ``kind`` over ``axes`` (n: the real length along the last axis)."""
    dual, rest, last = _DUAL[norm], axes[:-1], axes[-1]
    if kind == "fft":
        return np.fft.ifftn(g, axes=axes, norm=dual)
    if kind == "ifft":
        return np.fft.fftn(g, axes=axes, norm=dual)
    if kind == "rfft":
        # rfft = first n//2 + 1 rows of F: its adjoint Re(conj(F)^T [g; 0]) is irfft's Hermitian sum,
        # which counts each bin between 0 and n/2 twice (as k and n - k): those bins come in halved
        h = np.fft.ifftn(g, axes=rest, norm=dual) if rest else g
        return np.fft.irfft(h / _doubled(n, last, g), n, last, norm=dual)
    # irfft(h)_j sums h_k e^(2 pi i jk/n) once for bins 0 and n/2 and 2 Re(...) for the others, whose
    # imaginary parts of bins 0 and n/2 it drops: the adjoint is rfft of g with those bins doubled
    c = np.fft.rfft(g, n, last, norm=dual) * _doubled(n, last, g)
    return np.fft.fftn(c, axes=rest, norm=dual) if rest else c


def _node(kind, func, a, s, axes, norm, kwargs):
    if not isinstance(a, Traced):  # a list holding traced arrays, or a traced n=/s=
        raise NotTraceable("the input is not one traced array")
    if norm not in _DUAL:
        raise NotTraceable(f"norm={norm!r}")
    value = func(a._value, **kwargs)
    ndim = a.ndim
    if axes is None:
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    axes = [int(ax) % ndim for ax in axes]
    if len(set(axes)) < len(axes):
        raise NotTraceable("repeated axes")
    if not axes:  # fftn over no axes (a 0-d array, axes=()) returns its input as it is
        return record(value, [a], lambda ts: ts[0], lambda g: [g])
    n = None  # the real length along the last axis, which the one-sided spectrum does not say
    if kind == "rfft":
        n = s[-1] if s is not None and s[-1] not in (None, -1) else a.shape[axes[-1]]
    elif kind == "irfft":
        n = value.shape[axes[-1]]
    shape, dtype = a.shape, a.dtype

    def vjp(g):
        return [for_parent(_fit(_adjoint(kind, np.asarray(g), axes, norm, n), shape, axes), dtype)]

    return record(value, [a], lambda ts: func(ts[0], **kwargs), vjp)


def _one_d(kind, func):
    def rule(a, n=None, axis=-1, norm=None, out=None):
        if out is not None:
            raise NotTraceable("out=")
        return _node(kind, func, a, None if n is None else [n], [axis], norm, dict(n=n, axis=axis, norm=norm))

    return rule


def _n_d(kind, func, default_axes):
    def rule(a, s=None, axes=default_axes, norm=None, out=None):
        if out is not None:
            raise NotTraceable("out=")
        return _node(kind, func, a, s, axes, norm, dict(s=s, axes=axes, norm=norm))

    return rule


def hfft(a, n=None, axis=-1, norm=None, out=None):
    if out is not None or norm not in _DUAL:
        raise NotTraceable("out=" if out is not None else f"norm={norm!r}")
    # numpy's own definition (irfft's default n is hfft's): a Hermitian signal given by its first half
    return np.fft.irfft(np.conjugate(a), n, axis, norm=_DUAL[norm])


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    if out is not None or norm not in _DUAL:
        raise NotTraceable("out=" if out is not None else f"norm={norm!r}")
    return np.conjugate(np.fft.rfft(a, n, axis, norm=_DUAL[norm]))


def routes(d) -> dict:
    """numpy (or scipy) callable -> Route, built with ``d(impl)`` (a differentiable route)."""
    f = np.fft
    table = {f.fft: _one_d("fft", f.fft), f.ifft: _one_d("ifft", f.ifft),
             f.rfft: _one_d("rfft", f.rfft), f.irfft: _one_d("irfft", f.irfft),
             f.hfft: hfft, f.ihfft: ihfft,
             # the shifts are rolls: gathers
             f.fftshift: gather_rule(f.fftshift), f.ifftshift: gather_rule(f.ifftshift)}
    for kind, two, many in (("fft", f.fft2, f.fftn), ("ifft", f.ifft2, f.ifftn),
                            ("rfft", f.rfft2, f.rfftn), ("irfft", f.irfft2, f.irfftn)):
        table[two] = _n_d(kind, two, (-2, -1))
        table[many] = _n_d(kind, many, None)
    return {func: d(impl) for func, impl in table.items()}
