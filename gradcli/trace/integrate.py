"""scipy.integrate.odeint in the tracer: forward sensitivities of the solution in y0 and args.

The value is scipy's own ``odeint(func, y0, t, args)`` on plain values. Its derivative comes from a
second odeint of the augmented system [y, S], with dS/dt = J_y S + J_p and S(t0) = [I, 0] (the y0
columns only when y0 is traced, then one column per element of each traced argument), where J_y and
J_p are the Jacobians of the user's ``func`` at each (y, t), taken by tracing it with
:func:`gradcli.trace.trace`: so func's derivative is the tracer's own, and a func the tracer cannot
follow (a cut, an untraceable call) refuses the whole call. The augmented solve runs at rtol and atol
no looser than ``SENSITIVITY_TOL``, with ten times the step budget: at odeint's default 1.5e-8 the
sensitivities of a van der Pol oscillator were off by 1e-6 relative, at 1e-10 by 3e-8. The other
options go to both solves. A solve that does not succeed is refused.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np

from gradcli.trace.api import trace
from gradcli.trace.array import NotTraceable, Traced, find_tape, record, value_of

SENSITIVITY_TOL = 1e-10
_DEFAULT_TOL = 1.49012e-8  # odeint's own default rtol and atol
_SUCCESS = ("Integration successful.", "Nothing was done; the integration time was 0.")


def _refuse_traced(name, obj):
    if find_tape(obj) is not None:
        raise NotTraceable(f"traced {name}: only y0 and args are differentiated")


class _Func:
    """The user's func at a point: its value and the Jacobians in y and the traced arguments."""

    def __init__(self, func, args, traced, tfirst):
        self.func, self.args, self.tfirst = func, list(args), tfirst
        self.names = {i: f"args{i}" for i in traced}
        self.sizes = [np.size(args[i]) for i in traced]

    def __call__(self, y, t):
        """(f, J_y (n, n), J_p (n, sum of the traced arguments' sizes))."""
        def step(y, **ps):
            a = list(self.args)
            for i, name in self.names.items():
                a[i] = ps[name]
            out = self.func(t, y, *a) if self.tfirst else self.func(y, t, *a)
            return np.reshape(_as_array(out), -1)

        inputs = {"y": y, **{name: self.args[i] for i, name in self.names.items()}}
        tr = trace(step, inputs, ["y", *self.names.values()])
        n, p = y.size, sum(self.sizes)
        f = np.asarray(tr.value, dtype=float)
        if f.shape != (n,):
            raise NotTraceable(f"func returns {f.size} values for {n} equations")
        if not tr.ok:
            if tr.problem_details:  # else the output depends on neither: a zero Jacobian
                raise NotTraceable("func at t = %g: %s" % (t, "; ".join(tr.problems)))
            return f, np.zeros((n, n)), np.zeros((n, p))
        jy, jp = np.empty((n, n)), np.empty((n, p))
        for i in range(n):  # n reverse sweeps: never more than the n + p forward ones
            back = tr.vjp(np.eye(n)[i])
            jy[i] = back["y"]
            jp[i] = np.concatenate([np.ravel(back[name]) for name in self.names.values()] + [np.zeros(0)])
        return f, jy, jp


def _as_array(obj):
    """``obj`` as odeint reads it, a list holding traced values too (np.array called from here would
    convert them: only a call from the user's code is routed)."""
    return np.stack(obj) if isinstance(obj, (list, tuple)) and find_tape(obj) is not None else obj


def _tightened(tol, n, m):
    """The tolerance of the augmented solve: no looser than SENSITIVITY_TOL, S[i, :] at y[i]'s."""
    tol = np.minimum(_DEFAULT_TOL if tol is None else np.asarray(tol, dtype=float), SENSITIVITY_TOL)
    if tol.ndim == 0:
        return float(tol)
    tol = np.broadcast_to(tol, (n,))
    return np.concatenate([tol, np.repeat(tol, m)])


def odeint_rule(original):
    signature = inspect.signature(original)

    def rule(*call_args, **call_kwargs):
        opts = signature.bind(*call_args, **call_kwargs)
        opts.apply_defaults()
        opts = dict(opts.arguments)
        func, y0, t, args = (opts.pop(k) for k in ("func", "y0", "t", "args"))
        for name in ("Dfun", "ml", "mu"):  # a banded or user Jacobian is not the augmented system's
            if opts.get(name) is not None:
                raise NotTraceable(f"{name}=")
        if opts.pop("full_output", False):
            raise NotTraceable("full_output=True")
        _refuse_traced("t", t)
        for name, v in opts.items():
            _refuse_traced(name, v)
        args = args if isinstance(args, tuple) else (args,)
        if not isinstance(y0, Traced) and find_tape(y0) is not None:
            y0 = _as_array(y0)
        for i, a in enumerate(args):
            if not isinstance(a, Traced):
                _refuse_traced(f"args[{i}] inside a container", a)
        traced = [i for i, a in enumerate(args) if isinstance(a, Traced)]
        if any(np.iscomplexobj(value_of(x)) for x in (y0, *args) if isinstance(x, Traced)):
            raise NotTraceable("complex input")
        plain_args = tuple(value_of(a) for a in args)
        y0v = value_of(y0)
        value, info = original(func, y0v, t, plain_args, full_output=True, **opts)
        if info["message"] not in _SUCCESS:
            raise NotTraceable(f"the solve did not succeed: {info['message']}")

        # columns of S: y0's elements (when traced), then each traced argument's
        blocks = ([y0] if isinstance(y0, Traced) else []) + [args[i] for i in traced]
        n = np.size(y0v)
        m = sum(b.size for b in blocks)
        jac = _Func(func, plain_args, traced, opts.get("tfirst", False))
        s0 = np.zeros((n, m))
        if isinstance(y0, Traced):
            s0[:, :n] = np.eye(n)
        lead = n if isinstance(y0, Traced) else 0

        def rhs(z, tt):
            f, jy, jp = jac(z[:n], tt)
            ds = jy @ z[n:].reshape(n, m)
            ds[:, lead:] += jp
            return np.concatenate([f, ds.ravel()])

        aug = dict(opts, tfirst=False, printmessg=0, rtol=_tightened(opts.get("rtol"), n, m),
                   atol=_tightened(opts.get("atol"), n, m), mxstep=10 * (opts.get("mxstep") or 500))
        from scipy.integrate import ODEintWarning

        with warnings.catch_warnings():  # a failure is refused below: scipy's warning would be spurious
            warnings.simplefilter("ignore", ODEintWarning)
            z, info = original(rhs, np.concatenate([np.ravel(np.asarray(y0v, dtype=float)), s0.ravel()]),
                               t, full_output=True, **aug)
        if info["message"] not in _SUCCESS:
            raise NotTraceable(f"the sensitivity solve did not succeed: {info['message']}")
        sens = z[:, n:].reshape(len(z), n, m)
        return _node(value, sens, blocks)

    return rule


def _node(value, sens, blocks):
    """A node of ``value`` (len(t), n) whose derivative in the concatenated ``blocks`` is ``sens``;
    one Traced passed twice (as y0 and an argument) takes both blocks."""
    parents = list({id(b): b for b in blocks}.values())
    where = [next(k for k, p in enumerate(parents) if p is b) for b in blocks]
    bounds = np.cumsum([0] + [b.size for b in blocks])

    def jvp(ts):
        if all(x is None for x in ts):
            return None
        vec = np.concatenate([np.zeros(b.size) if ts[k] is None else np.ravel(ts[k])
                              for b, k in zip(blocks, where)])
        return sens @ vec

    def vjp(g):
        c = np.einsum("kij,ki->j", sens, np.real(g))
        adj = [None] * len(parents)
        for j, (b, k) in enumerate(zip(blocks, where)):
            part = c[bounds[j]:bounds[j + 1]].reshape(b.shape)
            adj[k] = part if adj[k] is None else adj[k] + part
        return adj

    return record(value, parents, jvp, vjp)
