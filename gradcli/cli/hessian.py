"""``gradcli hessian``: the Hessian of a scalar expression at a point, by four routes, side by side."""
from __future__ import annotations

import click

from gradcli.api import direction_vector, prepare
from gradcli.core.errors import BadInput
from gradcli.verdict.hessian import compare_hessian, require_scalar
from gradcli.verdict.point import PointOptions
from gradcli.verdict.report import HESSIAN_ORDER
from gradcli.core.parser import parse_constant
from gradcli.render.hessian import render_hessian
from gradcli.core.assignments import parse_assignments, parse_direction
from gradcli.cli.common import ExpressionCommand, fail, point_options, run_and_print
from gradcli.cli.formats import check_format, format_option


@click.command(cls=ExpressionCommand)
@click.argument("expr")
@point_options("symbolic, forward_over_reverse, reverse_over_forward, central_of_reverse")
@click.option("--direction", "direction", multiple=True, metavar="V",
              help="Also the directional derivative grad·v and the Hessian-vector product H·v: \"1,0\" "
                   "(one number per variable, in order of appearance) or \"x=1, y=0\" (unnamed: 0).")
@click.option("--full", is_flag=True, help="Show every method's full matrix, not only its largest error.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout and nothing else.")
@format_option
def hessian(expr, at, methods, rtol, atol, timeout, direction, full, as_json, fmt):
    """The Hessian of the scalar expression EXPR at a point.

    Forward-over-reverse, reverse-over-forward, central differences of the reverse gradient, and sympy
    as the reference; the Hessian's values, symmetry, eigenvalues and definiteness, and where the gradient
    is zero the kind of point (minimum, maximum, saddle).

    \b
    Examples:
      gradcli hessian "x**2*sin(y)" --at x=1.5 --at y=0.3
      gradcli hessian "x**2 - y**2" --at "x=0, y=0" --json        # a saddle
      gradcli hessian "x*y*z" --at "x=1, y=2, z=3" --direction "x=1"
      gradcli hessian "x**1.5" --at x=0                           # exit 3: no second derivative
      gradcli hessian -- -h**2 --at h=1                           # an expression like an option: after --

    Exit codes: 0 all methods agree, 1 a disagreement, 2 bad input (also a vector-valued expression),
    3 the Hessian is undefined or does not exist at the point (a kink anywhere on the path counts).
    """
    try:
        check_format(fmt, as_json)
        opts = PointOptions.validate(methods, rtol, atol, timeout, order=HESSIAN_ORDER)
        graph, point, warnings = prepare(expr, parse_assignments(at, parse_constant))
        require_scalar(graph)
        v = direction_vector(graph, parse_direction(direction, parse_constant)) if direction else None
    except BadInput as exc:
        fail(exc, as_json)
    run_and_print(compare_hessian, lambda r: render_hessian(r, full=full), graph, point, warnings, as_json, fmt,
                  opts.timeout, hessian=True, expression=expr, methods=opts.methods, rtol=opts.rtol, atol=opts.atol,
                  direction=v)
