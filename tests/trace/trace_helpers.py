"""Shared checks for the tracing tests: central differences and the jvp/vjp transpose identity."""
from __future__ import annotations

import inspect
import os

import numpy as np

from gradcli.trace import trace


def _select(result, output):
    if isinstance(result, (tuple, list)):
        result = result[0 if output is None else output]
    return np.asarray(result, dtype=complex if np.iscomplexobj(result) else float)


def numeric_jacobian(fn, inputs, name, output=None, h=1e-6):
    """(output size, input size) Jacobian by central differences, one input element at a time."""
    x = np.asarray(inputs[name], dtype=float)
    cols = []
    for k in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[k] += h
        xm.flat[k] -= h
        fp = _select(fn(**{**inputs, name: xp}), output)
        fm = _select(fn(**{**inputs, name: xm}), output)
        cols.append(((fp - fm) / (2 * h)).ravel())
    return np.stack(cols, axis=1)


def close(got, want, rtol=1e-6):
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def check_against_numerics(fn, inputs, wrt, output=None, seed=0, rtol=1e-6):
    """vjp and jvp of the trace vs central differences at random directions; the traced value is the
    plain one; returns the Trace."""
    t = trace(fn, inputs, wrt, output=output)
    assert t.ok, t.problems
    plain = _select(fn(**inputs), output)
    np.testing.assert_allclose(t.value, plain, rtol=1e-13, atol=1e-300)
    rng = np.random.default_rng(seed)
    jac = {n: numeric_jacobian(fn, inputs, n, output) for n in wrt}
    v = rng.normal(size=t.value.shape)
    u = {n: rng.normal(size=np.shape(inputs[n])) for n in wrt}
    back = t.vjp(v)
    for n in wrt:
        assert back[n].shape == np.shape(inputs[n])
        close(back[n].ravel(), jac[n].T @ v.ravel(), rtol)
    fwd = t.jvp(u)
    assert fwd.shape == t.value.shape
    close(fwd.ravel(), sum(jac[n] @ u[n].ravel() for n in wrt), rtol)
    return t


def check_transpose(fn, inputs, wrt, output=None, seeds=range(3)):
    """<u, vjp(v)> = <jvp(u), v> for random u, v: the two sweeps are transposes of each other."""
    t = trace(fn, inputs, wrt, output=output)
    assert t.ok, t.problems
    for seed in seeds:
        rng = np.random.default_rng(seed)
        v = rng.normal(size=t.value.shape)
        u = {n: rng.normal(size=np.shape(inputs[n])) for n in wrt}
        back = t.vjp(v)
        # Re<u, vjp(v)> = Re<jvp(u), v> with <a, b> = sum(conj(a) * b): vjp is jvp's adjoint in the
        # tracer's convention (gradcli.trace.linear); for real u and v it is the plain transpose
        lhs = np.real(sum(np.sum(np.conj(u[n]) * back[n]) for n in wrt))
        rhs = np.real(np.sum(np.conj(t.jvp(u)) * v))
        assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs), abs(rhs)), (lhs, rhs)
    return t


def line_of(fn, marker="# <- here"):
    """``file:line`` of the line of ``fn``'s source marked ``marker``: where a problem must be reported."""
    lines, start = inspect.getsourcelines(fn)
    name = os.path.basename(inspect.getsourcefile(fn))
    return f"{name}:{start + next(i for i, s in enumerate(lines) if marker in s)}"


def refused(fn, inputs, wrt, call):
    """The trace of ``fn`` is not trusted, with a problem that starts with ``call`` at its marked line."""
    t = trace(fn, inputs, wrt)
    assert not t.ok
    assert any(p.startswith(call) and line_of(fn) in p for p in t.problems), t.problems
    return t
