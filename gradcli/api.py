"""The Python API behind ``gradcli.grad``: text and a point in, a GradReport out."""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

import numpy as np

from gradcli.verdict.point import PointOptions, compare_point
from gradcli.core.assignments import check_names
from gradcli.core.errors import BadInput, brief, real_number
from gradcli.core.graph import Graph
from gradcli.core.parse_hints import suggest_call, suspicious_variables
from gradcli.core.parser import parse_expression
from gradcli.render.json import finite_or_none
from gradcli.verdict.report import HESSIAN_ORDER, GradReport, HessianReport, MethodResult


def prepare(expr: str, point: dict) -> tuple[Graph, dict, list]:
    """Parse ``expr`` and check ``point`` against its variables -> (graph, point, warnings)."""
    graph = parse_expression(expr)
    check_names(graph.variables, point)
    clean = {}
    for name in graph.variables:
        clean[name] = real_number(point[name], f"the value of {name}")
        if not math.isfinite(clean[name]):
            raise BadInput(f"the value of {name} must be finite, got {clean[name]}")
    # only when it is the only variable: with others around, `cost` or `expected` is far more likely meant
    lone = suspicious_variables(graph) if len(graph.variables) == 1 else []
    warnings = [f"{v} is a variable; did you mean {suggest_call(v)}?" for v in lone]
    return graph, clean, warnings


def grad(expr: str, point: dict | None = None, *, methods=None, rtol=None, atol=None, timeout=5.0,
         direction=None, **values) -> GradReport:
    """The gradient of ``expr`` at a point, by every method, with errors and a verdict.

    >>> r = grad("x**2*sin(y)", x=1.5, y=0.3)
    >>> r.status, round(r.gradient["x"], 6)
    ('agree', 0.886561)

    ``r.to_dict()`` is exactly the ``gradcli grad --json`` document. Pass ``point={...}`` for variable
    names that clash with the keyword options; ``direction`` (a sequence in variable order, or a dict
    by name) adds each method's directional derivative J·v. Raises :class:`gradcli.BadInput` on bad input.
    """
    opts = PointOptions.validate(methods, rtol, atol, timeout)
    graph, clean, warnings = prepare(expr, merge_point(point, values))
    v = None if direction is None else direction_vector(graph, direction)
    return PythonGradReport.of(compare_point(graph, clean, expression=expr, methods=opts.methods, rtol=opts.rtol,
                                             atol=opts.atol, timeout=opts.timeout, warnings=warnings, direction=v))


class ByVariable(dict):
    """One number per variable, as the JSON document has them (None where not finite); ``max()`` is the
    largest of the finite ones (None if there is none), as an array's would be."""

    def max(self):
        finite = [v for v in self.values() if v is not None]
        return max(finite) if finite else None


class MethodView:
    """One method's result as ``gradcli.grad`` returns it: ``gradient`` and ``rel_error`` by variable, as
    in the JSON document (``r.methods["central"].rel_error["x"]``), or for a vector-valued expression as
    its lists of rows (outputs × variables); None where the method has none. ``jacobian``,
    ``abs_error``, ``error_estimate`` and ``tolerance`` are the matrices (outputs × variables), and
    ``result`` is the :class:`~gradcli.verdict.report.MethodResult` the renderers read."""

    def __init__(self, result: MethodResult, variables: list, vector: bool):
        self.result, self._variables, self._vector = result, list(variables), vector

    def __getattr__(self, name):  # name, status, message, seconds, the matrices, max_rel_error
        if name.startswith("__") or name in ("result", "_variables", "_vector"):
            raise AttributeError(name)
        return getattr(self.result, name)

    def _as_json(self, matrix):
        if matrix is None:
            return None
        rows = [[finite_or_none(v) for v in row] for row in np.asarray(matrix, dtype=float)]
        return rows if self._vector else ByVariable(zip(self._variables, rows[0]))

    @property
    def gradient(self):
        return self._as_json(self.result.jacobian)

    @property
    def rel_error(self):
        return self._as_json(self.result.rel_error)

    def __repr__(self):
        return (f"MethodView(name={self.result.name!r}, status={self.result.status!r}, gradient={self.gradient!r}, "
                f"rel_error={self.rel_error!r})")


@dataclasses.dataclass
class PythonGradReport(GradReport):
    """The GradReport of ``gradcli.grad``: ``methods`` maps each name to a :class:`MethodView`;
    ``to_dict()`` is still exactly the ``--json`` document."""

    @classmethod
    def of(cls, report: GradReport) -> "PythonGradReport":
        fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
        fields["methods"] = {name: MethodView(m, report.variables, report.vector) for name, m in report.methods.items()}
        return cls(**fields)

    def to_dict(self) -> dict:
        raw = dataclasses.replace(self, methods={name: m.result for name, m in self.methods.items()})
        return GradReport.to_dict(raw)


def hessian(expr: str, point: dict | None = None, *, methods=None, rtol=None, atol=None, timeout=5.0,
            direction=None, **values) -> HessianReport:
    """The Hessian of the scalar expression ``expr`` at a point: forward-over-reverse,
    reverse-over-forward, central differences of the reverse gradient and sympy, with errors,
    symmetry, eigenvalues, definiteness and a verdict.

    >>> r = hessian("x**2 - y**2", x=0.0, y=0.0)
    >>> r.status, r.definiteness, r.hessian.tolist()
    ('agree', 'saddle', [[2.0, 0.0], [0.0, -2.0]])

    ``r.to_dict()`` is exactly the ``gradcli hessian --json`` document; ``direction`` (a sequence in
    variable order, or a dict by name) adds grad·v and H·v per method. Raises :class:`gradcli.BadInput`
    on bad input, including a vector-valued expression.
    """
    # here, not at the top: methods/hessian imports sympy, which grad at a point without the symbolic
    # method must not load
    from gradcli.verdict.hessian import compare_hessian, require_scalar

    opts = PointOptions.validate(methods, rtol, atol, timeout, order=HESSIAN_ORDER)
    graph, clean, warnings = prepare(expr, merge_point(point, values))
    require_scalar(graph)
    v = None if direction is None else direction_vector(graph, direction)
    return compare_hessian(graph, clean, expression=expr, methods=opts.methods, rtol=opts.rtol, atol=opts.atol,
                           timeout=opts.timeout, warnings=warnings, direction=v)


def merge_point(point, values: dict) -> dict:
    """``point={...}`` and the keyword values as one dict (a name in both is given twice)."""
    if point is None:
        return dict(values)
    if not isinstance(point, Mapping):
        raise BadInput(f"point must be a dict of variable name -> value, got {brief(point)}")
    twice = [k for k in point if k in values]
    if twice:
        raise BadInput(f"{twice[0]} is given twice (in point= and as a keyword)")
    return {**point, **values}


def direction_vector(graph: Graph, direction, option: str = "--direction") -> list:
    """A direction as one float per variable: from a sequence in variable order, or a dict by name
    (variables it does not name are 0)."""
    names = graph.variables
    if isinstance(direction, Mapping):
        extra = [brief(k) if not isinstance(k, str) else k for k in direction if k not in names]
        if extra:
            raise BadInput(f"{option}: {', '.join(extra)} is not a variable of the expression")
        values = [direction.get(v, 0.0) for v in names]
    elif isinstance(direction, (str, bytes)) or not isinstance(direction, Iterable):
        raise BadInput(f"{option} must be a sequence of numbers (one per variable) or a dict by name, "
                       f"got {brief(direction)}")
    else:
        values = list(direction)
        if len(values) != len(names):
            raise BadInput(f"{option} has {len(values)} component(s), the expression {len(names)} "
                           f"variable(s) ({', '.join(names) or 'none'})")
    out = [real_number(v, f"{option}: every component") for v in values]
    if not all(math.isfinite(v) for v in out):
        raise BadInput(f"{option}: every component must be finite")
    return out
