"""``gradcli grad``: the gradient of an expression at a point, by every method, side by side."""
from __future__ import annotations

import sys

import click
import numpy as np

from ..api import prepare
from ..compare import compare_point, parse_methods
from ..render.json import dumps
from ..render.table import render_grad
from ..errors import BadInput
from .common import JsonCommand, console, fail, parse_assignments


@click.command(cls=JsonCommand)
@click.argument("expr")
@click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
              help="A variable's value; repeatable, or several as \"x=1, y=2\". VALUE may be a constant "
                   "expression such as pi/4.")
@click.option("--method", "-m", "methods", multiple=True, metavar="NAME",
              help="Methods to show (repeatable or comma-separated): symbolic, forward, reverse, central, "
                   "richardson, complex_step. Default: all.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance for every method (default: per method).")
@click.option("--atol", type=float, default=None, help="Absolute tolerance for every method (default 0).")
@click.option("--timeout", type=float, default=5.0, show_default=True,
              help="Seconds sympy may take before the symbolic method is reported unavailable.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout and nothing else.")
def grad(expr, at, methods, rtol, atol, timeout, as_json):
    """The gradient of EXPR at a point, by forward and reverse mode, finite differences and sympy.

    \b
    Examples:
      gradcli grad "x**2*sin(y)" --at x=1.5 --at y=0.3
      gradcli grad "atan2(y, x)" --at "x=1, y=-1" --json
      gradcli grad "sqrt(x)" --at x=0           # exit 3: the derivative does not exist

    Exit codes: 0 all methods agree, 1 a disagreement, 2 bad input, 3 undefined or not differentiable
    at the point.
    """
    try:
        if rtol is not None and not rtol >= 0 or atol is not None and not atol >= 0:
            raise BadInput("--rtol and --atol must be non-negative numbers")
        if not 0 <= timeout <= 1e6:  # also rejects nan; 0 means no limit
            raise BadInput("--timeout must be a number of seconds from 0 (no limit) to 1e6")
        selected = parse_methods(methods) if methods else None
    except ValueError as exc:
        fail(BadInput(str(exc)), as_json)
    except BadInput as exc:
        fail(exc, as_json)
    try:
        graph, point, warnings = prepare(expr, parse_assignments(at, _parse_constant()))
    except BadInput as exc:
        fail(exc, as_json)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    # overflow and domain errors are reported by the diagnostics, not as numpy RuntimeWarnings on stderr
    with np.errstate(all="ignore"):
        report = compare_point(graph, point, expression=expr, methods=selected, rtol=rtol, atol=atol,
                               timeout=timeout, warnings=warnings)
    if as_json:
        click.echo(dumps(report.to_dict()))
    else:
        console().print(render_grad(report))
    sys.exit(report.exit_code)


def _parse_constant():
    from ..parser import parse_constant

    return parse_constant
