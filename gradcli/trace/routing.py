"""THE routing table: what happens to every numpy call that meets a traced array.

One dict, ``ROUTES``, from the numpy callable (a function, a ufunc, or ``(ufunc, method)`` for
``np.add.at``/``np.add.reduce``) to a :class:`Route` of one of four kinds:

* ``differentiable``: ``impl(*args, **kwargs)`` records a node with explicit jvp and vjp;
* ``passthrough``: shape queries, comparisons, index results: computed on plain values, returned plain;
  they carry no derivative and need none;
* ``constant``: piecewise-constant functions (floor, sign, round...): derivative zero almost everywhere,
  computed on plain values and returned plain (the trace is not cut: zero *is* the derivative);
* anything else is *not traceable*: computed on plain values, returned plain, recorded as a problem
  naming the call and the user's line, so that the check falls back to numerics.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gradcli.trace import aliases, arrays, composites, fft, linalg, pinv, special
from gradcli.trace import contract as c
from gradcli.trace import rules as r
from gradcli.trace import structural as s
from gradcli.trace.array import ROUTES


@dataclass(frozen=True)
class Route:
    kind: str  # "differentiable" | "passthrough" | "constant"
    impl: Callable | None = None


PASSTHROUGH = Route("passthrough")
CONSTANT = Route("constant")


def _build():
    d = lambda impl: Route("differentiable", impl)  # noqa: E731
    routes = {u: d(rule) for u, rule in r.elementwise_rules().items()}
    routes.update({
        np.conjugate: d(r.conjugate), np.matmul: d(c.matmul_rule),
        # reductions
        np.sum: d(r.sum_rule), np.mean: d(r.mean_rule), np.prod: d(r.prod_rule),
        np.max: d(r.extremum_rule(np.max)), np.amax: d(r.extremum_rule(np.max)),
        np.min: d(r.extremum_rule(np.min)), np.amin: d(r.extremum_rule(np.min)),
        np.var: d(r.var_rule), np.std: d(r.std_rule), np.cumsum: d(r.cumsum_rule),
        (np.add, "reduce"): d(r.ufunc_reduce(r.sum_rule)),
        (np.multiply, "reduce"): d(r.ufunc_reduce(r.prod_rule)),
        (np.maximum, "reduce"): d(r.extremum_rule(np.max, default_axis=0)),
        (np.minimum, "reduce"): d(r.extremum_rule(np.min, default_axis=0)),
        (np.add, "accumulate"): d(r.add_accumulate),
        (np.add, "at"): d(s.add_at),
        # contractions
        np.dot: d(c.dot_rule), np.outer: d(c.outer_rule), np.inner: d(c.inner_rule),
        np.einsum: d(c.einsum_rule), np.tensordot: d(c.tensordot_rule), np.trace: d(c.trace_rule),
        np.linalg.norm: d(c.norm_rule),
        # shapes
        np.reshape: d(s.reshape_like(np.reshape)), np.ravel: d(s.reshape_like(np.ravel)),
        np.squeeze: d(s.reshape_like(np.squeeze)), np.expand_dims: d(s.reshape_like(np.expand_dims)),
        np.atleast_1d: d(s.reshape_like(np.atleast_1d)), np.atleast_2d: d(s.reshape_like(np.atleast_2d)),
        np.atleast_3d: d(s.reshape_like(np.atleast_3d)),
        np.transpose: d(s.transpose_rule), np.swapaxes: d(s.swapaxes_rule), np.moveaxis: d(s.moveaxis_rule),
        np.broadcast_to: d(s.broadcast_to_rule), np.copy: d(s.copy_rule),
        np.real: d(s.real_rule), np.imag: d(s.imag_rule),
        # gathers: every output element is a copy of an input element (or a constant)
        np.concatenate: d(s.gather_rule(np.concatenate)), np.stack: d(s.gather_rule(np.stack)),
        np.hstack: d(s.gather_rule(np.hstack)), np.vstack: d(s.gather_rule(np.vstack)),
        np.dstack: d(s.gather_rule(np.dstack)), np.column_stack: d(s.gather_rule(np.column_stack)),
        np.repeat: d(s.gather_rule(np.repeat)), np.tile: d(s.gather_rule(np.tile)),
        np.flip: d(s.gather_rule(np.flip)), np.fliplr: d(s.gather_rule(np.fliplr)),
        np.flipud: d(s.gather_rule(np.flipud)), np.roll: d(s.gather_rule(np.roll)),
        np.rot90: d(s.gather_rule(np.rot90)), np.diagonal: d(s.gather_rule(np.diagonal)),
        np.diag: d(s.gather_rule(np.diag)), np.triu: d(s.gather_rule(np.triu)),
        np.tril: d(s.gather_rule(np.tril)), np.take: d(s.gather_rule(np.take)),
        np.take_along_axis: d(s.gather_rule(np.take_along_axis)), np.pad: d(s.pad_rule),
        np.where: d(s.where_rule), np.clip: d(s.clip_rule),
    })
    for module in (linalg, pinv, special, fft, arrays, composites, aliases):  # each module's own table
        routes.update(module.routes(d))
    for f in (np.shape, np.ndim, np.size, np.zeros_like, np.ones_like, np.empty_like,
              np.argmax, np.argmin, np.argsort, np.nonzero, np.flatnonzero, np.argwhere, np.isclose,
              np.allclose, np.array_equal, np.all, np.any, np.count_nonzero, np.result_type,
              np.may_share_memory, np.shares_memory, np.isreal, np.iscomplex, np.iscomplexobj, np.isrealobj,
              np.searchsorted, np.digitize, np.unique, np.isin):
        routes[f] = PASSTHROUGH
    for u in (np.isfinite, np.isnan, np.isinf, np.signbit, np.equal, np.not_equal, np.less,
              np.less_equal, np.greater, np.greater_equal, np.logical_and, np.logical_or, np.logical_xor,
              np.logical_not):
        routes[u] = PASSTHROUGH
    routes[np.sign] = Route("constant", r.sign_rule)  # refuses complex input, where sign is z/|z|
    for u in (np.floor, np.ceil, np.trunc, np.rint, np.heaviside, np.floor_divide, np.round,
              np.around, np.fix):
        routes[u] = CONSTANT
    return routes


def kind_of(func) -> str:
    """The route of a numpy callable: differentiable, passthrough, constant or untraceable."""
    route = ROUTES.get(func)
    return route.kind if route is not None else "untraceable"


ROUTES.update(_build())
