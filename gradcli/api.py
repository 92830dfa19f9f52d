"""The Python API behind ``gradcli.grad``: text and a point in, a GradReport out."""
from __future__ import annotations

import math

from .compare import compare_point
from .errors import BadInput
from .graph import Graph
from .report import GradReport


def _parse(expr: str) -> Graph:
    from .parser import ParseError, parse

    if not isinstance(expr, str):
        raise BadInput(f"an expression must be a string, got {type(expr).__name__}")
    try:
        return parse(expr)
    except ParseError as exc:
        raise BadInput(exc.one_line(), detail=exc.caret(), column=exc.column) from None


def prepare(expr: str, point: dict) -> tuple[Graph, dict, list]:
    """Parse ``expr`` and check ``point`` against its variables -> (graph, point, warnings)."""
    from .parser import suggest_call, suspicious_variables

    graph = _parse(expr)
    missing = [v for v in graph.variables if v not in point]
    if missing:
        raise BadInput(f"no value for {', '.join(missing)}: pass --at {missing[0]}=VALUE"
                       + (" for each" if len(missing) > 1 else ""))
    extra = [k for k in point if k not in graph.variables]
    if extra:
        have = ", ".join(graph.variables) or "none"
        raise BadInput(f"{', '.join(extra)} {'is not a variable' if len(extra) == 1 else 'are not variables'} "
                       f"of the expression (its variables: {have})")
    clean = {}
    for name in graph.variables:
        try:
            clean[name] = float(point[name])
        except (TypeError, ValueError):
            raise BadInput(f"the value of {name} must be a real number, got {point[name]!r}") from None
        if not math.isfinite(clean[name]):
            raise BadInput(f"the value of {name} must be finite, got {clean[name]}")
    # only when it is the only variable: with others around, `cost` or `expected` is far more likely meant
    lone = suspicious_variables(graph) if len(graph.variables) == 1 else []
    warnings = [f"{v} is a variable; did you mean {suggest_call(v)}?" for v in lone]
    return graph, clean, warnings


def grad(expr: str, point: dict | None = None, *, methods=None, rtol=None, atol=None, timeout=5.0,
         **values) -> GradReport:
    """The gradient of ``expr`` at a point, by every method, with errors and a verdict.

    >>> r = grad("x**2*sin(y)", x=1.5, y=0.3)
    >>> r.status, round(r.gradient["x"], 6)
    ('agree', 0.886561)

    ``r.to_dict()`` is exactly the ``gradcli grad --json`` document. Pass ``point={...}`` for variable
    names that clash with the keyword options. Raises :class:`gradcli.BadInput` on bad input.
    """
    graph, clean, warnings = prepare(expr, {**(point or {}), **values})
    return compare_point(graph, clean, expression=expr, methods=methods, rtol=rtol, atol=atol,
                         timeout=timeout, warnings=warnings)
