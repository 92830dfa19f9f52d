"""Complex inputs and outputs, checked as pairs of real numbers in PyTorch's convention.

The gradient of a real output L with respect to a complex input z is dL/dRe(z) + i dL/dIm(z) (PyTorch's
documented convention, the conjugate Wirtinger derivative times 2: a step along minus it descends). So a
complex input of shape S is checked as a real input of shape S + (2,), its real and imaginary parts, and
a hand-written gradient g as (Re g, Im g): the whole check (numerics, traced AD, the report) then runs on
real arrays, and index [..., 0] of such an input is the real part, [..., 1] the imaginary part. A complex
output is checked the same way, as its real and imaginary parts (a vjp under test receives the
cotangent g_re + i g_im of the real loss <g_re, Re f> + <g_im, Im f>).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from gradcli.trace.array import rebuild

NOTE = ("{names}: complex, checked as real and imaginary parts (index [..., 0] and [..., 1]) in PyTorch's "
        "convention: the gradient is dL/dRe + i dL/dIm")


def pairs(z):
    # np.real/np.imag/np.stack, not attributes and casts: a traced output must stay traced
    return np.stack([np.real(z), np.imag(z)], axis=-1)


def joined(p):
    # no np.asarray: a traced pair must stay traced (the trace follows z into the user's code)
    return p[..., 0] + 1j * p[..., 1]


def call_user(f, args, kw):
    """``f(*args, **kw)``; a ufunc takes no keywords, so its inputs go in the order given."""
    return f(*args, *kw.values()) if isinstance(f, np.ufunc) else f(*args, **kw)


def as_pairs(spec, inputs: dict, names: list, wrt: list):
    """The spec with its function and hand-written gradients seeing complex ``names`` while the check
    hands them pairs, and the inputs as pairs -> (spec, inputs, note). ``wrt``: the differentiated
    inputs in order, which a hand-written gradient's tuple follows."""
    shapes = {k: np.shape(inputs[k]) for k in names}

    def to_user(kw):
        return {k: joined(v) if k in shapes else v for k, v in kw.items()}

    def grads_out(res):
        """A hand-written result (one array, a tuple in wrt order or a dict) with complex gradients as pairs."""
        def one(k, g):
            return pairs(g) if k in shapes and np.shape(g) == shapes[k] else g
        if isinstance(res, dict):
            return {k: one(k, g) for k, g in res.items()}
        if isinstance(res, (tuple, list)):
            return rebuild(res, (one(k, g) for k, g in zip(wrt, res))) if len(wrt) == len(res) else res
        return one(wrt[0], res) if len(wrt) == 1 else res

    def wrap(f, with_grad=False):
        if f is None:
            return None

        @functools.wraps(f)
        def call(*args, **kw):
            out = call_user(f, args, to_user(kw))
            if with_grad and isinstance(out, tuple) and len(out) == 2:
                return out[0], grads_out(out[1])
            return out
        return call

    def wrap_grad(f):
        if f is None or not callable(f):
            return f

        @functools.wraps(f)
        def call(*args, **kw):
            return grads_out(f(*args, **to_user(kw)))
        return call

    with_grad = bool(spec.options.get("with_grad"))
    new = dataclasses.replace(spec, fn=wrap(spec.fn, with_grad), grad=wrap_grad(spec.grad),
                              vjp=wrap_grad(spec.vjp))
    moved = {k: pairs(v) if k in shapes else v for k, v in inputs.items()}
    return new, moved, NOTE.format(names=", ".join(names))


def real_outputs(spec):
    """The spec with a complex output (or complex arrays in a tuple or list it returns) handed to the
    check as real and imaginary parts, and the hand-written vjp given the matching complex cotangent.
    The function it returns takes keywords whatever the target (:func:`call_user`)."""
    seen = [False]

    def as_real(out):
        if isinstance(out, (tuple, list)):
            return rebuild(out, (as_real(o) for o in out))
        if np.iscomplexobj(out) if not hasattr(out, "dtype") else out.dtype.kind == "c":
            seen[0] = True
            return pairs(out)
        return out

    def wrap_fn(f):
        if f is None:
            return None

        @functools.wraps(f)
        def call(*args, **kw):
            probing = any(np.iscomplexobj(v) for v in kw.values() if isinstance(v, np.ndarray))
            if probing and seen[0]:  # complex step at a complex output measures nothing
                raise TypeError("complex step does not apply to a complex output")
            out = call_user(f, args, kw)
            if probing:  # complex step's own call (f holomorphic, real at real inputs): as it is
                return out
            if spec.options.get("with_grad") and isinstance(out, tuple) and len(out) == 2:
                return as_real(out[0]), out[1]
            return as_real(out)
        return call

    def wrap_vjp(f):
        if f is None:
            return None

        @functools.wraps(f)
        def call(g, *args, **kw):
            return f(joined(g) if seen[0] else g, *args, **kw)
        return call

    return dataclasses.replace(spec, fn=wrap_fn(spec.fn), vjp=wrap_vjp(spec.vjp))


def framework_pairs(built: tuple, names: list) -> tuple:
    """A framework target's (fn, vjp, ad_factory, inputs), built on complex ``names``, taking them as pairs
    as the pipeline hands them, with complex outputs, gradients and tangents as pairs too. The framework's
    own gradient of a real loss with respect to z is dL/dRe z + i dL/dIm z (PyTorch's convention), which
    as a pair is exactly what the numerics measure; its cotangent on a complex output is g_re + i g_im."""
    fn, vjp, ad_factory, inputs = built
    complex_out = [False]

    def to_user(kw):
        return {k: joined(v) if k in names else v for k, v in kw.items()}

    def as_real(out):
        if isinstance(out, (tuple, list)):
            return type(out)(as_real(o) for o in out)
        if np.iscomplexobj(out):
            complex_out[0] = True
            return pairs(out)
        return out

    def grads_out(res: dict) -> dict:
        return {k: pairs(g) if k in names else g for k, g in res.items()}

    def user_g(g):
        return joined(np.asarray(g)) if complex_out[0] else g

    def call(**kw):
        if any(np.iscomplexobj(v) for v in kw.values()):  # complex step: its pairs would be read as parts
            raise TypeError("complex step does not apply to complex inputs")
        return as_real(fn(**to_user(kw)))

    def wrapped_vjp(of):
        return lambda g, /, **kw: grads_out(of(user_g(g), **to_user(kw)))

    pair_vjp = wrapped_vjp(vjp)
    for name in ("framework_none", "framework_notes"):
        if hasattr(vjp, name):
            setattr(pair_vjp, name, getattr(vjp, name))
    if hasattr(vjp, "float64"):
        pair_vjp.float64 = wrapped_vjp(vjp.float64)
    jvp = getattr(vjp, "framework_jvp", None)
    if jvp is not None:
        pair_vjp.framework_jvp = lambda u, /, **kw: as_real(np.asarray(jvp(to_user(u), **to_user(kw))))
        pair_vjp.framework_jvp.label, pair_vjp.framework_jvp.method = jvp.label, jvp.method

    def pair_ad(base, wrt):
        ad = ad_factory(to_user(base), wrt)
        return None if ad is None else _PairAD(ad, as_real, grads_out, user_g)

    moved = {k: pairs(v) if k in names else v for k, v in inputs.items()}
    return call, pair_vjp, None if ad_factory is None else pair_ad, moved


class _PairAD:
    """A framework's AD of the primal (the reference beside the numerics) over pairs."""

    def __init__(self, ad, as_real, grads_out, user_g):
        self.ad, self.grads_out, self.user_g = ad, grads_out, user_g
        self.method, self.label = ad.method, ad.label
        self.value = as_real(ad.value)

    def vjp(self, w) -> dict:
        return self.grads_out(self.ad.vjp(self.user_g(w)))

    def gradient(self) -> dict:
        return self.vjp(np.ones(np.shape(self.value)))
