"""``gradcli grad``: the gradient of an expression at a point, by every method, side by side."""
from __future__ import annotations

import click

from gradcli.api import direction_vector, prepare
from gradcli.verdict.point import PointOptions, compare_point
from gradcli.core.errors import BadInput
from gradcli.core.parser import parse_constant
from gradcli.render.table import render_grad
from gradcli.core.assignments import parse_assignments, parse_direction
from gradcli.cli.common import ExpressionCommand, fail, point_options, run_and_print
from gradcli.cli.formats import check_format, format_option


@click.command(cls=ExpressionCommand)
@click.argument("expr")
@point_options("symbolic, forward, reverse, central, richardson, complex_step")
@click.option("--direction", "direction", multiple=True, metavar="V",
              help="Also the directional derivative J·v: \"1,0\" (one number per variable, in order of "
                   "appearance) or \"x=1, y=0\" (unnamed: 0).")
@click.option("--full", is_flag=True, help="Vector-valued expressions: one row per Jacobian entry, not per method.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout and nothing else.")
@format_option
@click.option("--batch", "batch_n", type=int, default=None, metavar="N",
              help="Batch mode: N uniform random points from --domain.")
@click.option("--domain", "domains", multiple=True, metavar="NAME=LOW:HIGH",
              help="With --batch: the box to sample; repeatable, or several as \"x=-1:1, y=0:2\".")
@click.option("--points", "points_file", default=None, metavar="FILE",
              help="Batch mode: the points from a .npy, .npz or .csv file (header of variable names).")
@click.option("--seed", type=int, default=None, help="With --batch: the random seed (default 0).")
@click.option("--device", default=None, metavar="cpu|cuda|auto", help="Batch mode: where to compute (default cpu).")
@click.option("--engine", default=None, metavar="numpy|numba|cuda",
              help="Batch mode: the engine of the compiled program (default: chosen from the batch; "
                   "docs/batch-usage.md says how).")
@click.option("--dtype", default=None, metavar="float64|float32", help="Batch mode: the precision (default float64).")
@click.option("--chunk", type=int, default=None, metavar="N",
              help="Batch mode: points per chunk; memory grows with it (default 65536 on the CPU, from the "
                   "free memory on a GPU).")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Batch mode: write points, values and gradients to a .npz or .csv file (atomically).")
@click.option("--dask", "dask", default=None, metavar="ADDRESS",
              help="Batch mode: run the chunks on a Dask cluster, e.g. tcp://host:8786 (pip install 'gradcli[dask]').")
def grad(expr, at, methods, rtol, atol, timeout, direction, full, as_json, fmt, batch_n, domains, points_file, seed,
         device, engine, dtype, chunk, out, dask):
    """The gradient of EXPR at a point by every method, side by side.

    Forward and reverse mode, finite differences (central, Richardson, complex step) and sympy, each
    measured against the reference.

    \b
    Examples:
      gradcli grad "x**2*sin(y)" --at x=1.5 --at y=0.3
      gradcli grad "atan2(y, x)" --at "x=1, y=-1" --json
      gradcli grad "x*y, x+y" --at "x=1, y=2" --full --direction "1,1"
      gradcli grad "sqrt(x)" --at x=0           # exit 3: the derivative does not exist
      gradcli grad "x**2*sin(y)" --batch 100000 --domain "x=-1:1, y=0:2"
      gradcli grad "log(x)" --points pts.csv --out grads.npz --json
      gradcli grad -- -h --at h=2               # an expression that reads as an option: after --

    Exit codes: 0 all methods agree, 1 a disagreement, 2 bad input, 3 undefined or not differentiable
    at the point. In batch mode: 0 every method agrees wherever the gradient is defined (undefined points
    are counted, not failed), 1 a disagreement at any point, 3 no point had a defined gradient.
    """
    try:
        check_format(fmt, as_json, batch=batch_n is not None or points_file is not None)
    except BadInput as exc:
        fail(exc, as_json)
    if batch_n is not None or points_file is not None:
        if direction:
            fail(BadInput("--direction applies at one point (--at), not in batch mode"), as_json)
        # here, not at the top: batch mode's modules import sympy (its reference is compiled from
        # sympy's derivative) and the engines, which grad at a point must not load
        from gradcli.cli.grad_batch import run_batch_command

        run_batch_command(click.get_current_context().params)
        return
    batch_only = [name for name, v in (("--domain", domains), ("--seed", seed), ("--device", device),
                                       ("--engine", engine), ("--dtype", dtype), ("--chunk", chunk), ("--out", out),
                                       ("--dask", dask))
                  if v is not None and v != ()]  # given at all, even as "" or 0
    if batch_only:
        fail(BadInput(f"{batch_only[0]} only applies in batch mode: add --batch N or --points FILE"), as_json)
    try:
        opts = PointOptions.validate(methods, rtol, atol, timeout)
        graph, point, warnings = prepare(expr, parse_assignments(at, parse_constant))
        v = direction_vector(graph, parse_direction(direction, parse_constant)) if direction else None
    except BadInput as exc:
        fail(exc, as_json)
    run_and_print(compare_point, lambda r: render_grad(r, full=full), graph, point, warnings, as_json, fmt,
                  opts.timeout, expression=expr, methods=opts.methods, rtol=opts.rtol, atol=opts.atol, direction=v)
