"""``gradcli explain``: how every method reaches the derivative of an expression at a point."""
from __future__ import annotations

import sys

import click
import numpy as np

from gradcli.api import direction_vector, prepare
from gradcli.core.errors import BadInput
from gradcli.explain import CAP
from gradcli.explain import explain as build
from gradcli.core.parser import parse_constant
from gradcli.render.explain import render_explanation
from gradcli.render.json import dumps
from gradcli.core.assignments import parse_assignments, parse_direction
from gradcli.cli.common import ExpressionCommand, console, fail
from gradcli.verdict.point import PointOptions


@click.command(cls=ExpressionCommand)
@click.argument("expr")
@click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
              help="A variable's value; repeatable, or several as \"x=1, y=2\". VALUE may be a constant "
                   "expression such as pi/4.")
@click.option("--tangent", "tangent", multiple=True, metavar="V",
              help="The forward-mode direction: \"1,0\" (one number per variable, in order of appearance) or "
                   "\"x=1, y=0\" (unnamed: 0). Default: the first variable's unit vector.")
@click.option("--all", "show_all", is_flag=True,
              help="Lift the cap: show every step, node and finite-difference entry of a large expression.")
@click.option("--timeout", type=float, default=5.0, show_default=True,
              help="Seconds sympy may take before the symbolic derivative is reported unavailable.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout and nothing else.")
def explain(expr, at, tangent, show_all, timeout, as_json):
    """Explain how each method differentiates EXPR at a point.

    Shown: the graph as a tree (shared nodes marked), the forward trace as a Wengert list with its
    tangents, the reverse sweep (adjoints, local partials and their products, summed where a node is
    used several times), sympy's derivative, and how central differences and Richardson extrapolation
    made their estimates.

    \b
    Examples:
      gradcli explain "x*y + sin(x)" --at "x=1.5, y=0.3"
      gradcli explain "x*y + sin(x)" --at "x=1.5, y=0.3" --tangent "0,1"
      gradcli explain "x*y, x+y" --at "x=1, y=2" --json
      gradcli explain -- -h --at h=2        # an expression that reads as an option: after --

    Above 60 nodes the lists show their first and last 20 entries and the tree stops 8 levels deep
    (--all shows everything). A vector-valued expression gets one reverse sweep per output.

    Exit codes: 0 explained, 2 bad input, 3 the point is undefined or not differentiable (what can be
    computed is still explained).
    """
    try:
        timeout = PointOptions.validate(timeout=timeout).timeout
        graph, point, warnings = prepare(expr, parse_assignments(at, parse_constant))
        v = None
        if tangent:
            v = direction_vector(graph, parse_direction(tangent, parse_constant, option="--tangent"),
                                 option="--tangent")
    except BadInput as exc:
        fail(exc, as_json)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    with np.errstate(all="ignore"):
        ex = build(graph, point, tangent=v, cap=None if show_all else CAP, expression=expr, timeout=timeout or None)
    if as_json:
        click.echo(dumps(ex.to_dict()))
    else:
        console().print(render_explanation(ex))
    sys.exit(ex.exit_code)
