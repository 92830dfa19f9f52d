"""``gradcli plot`` (a function and its derivative over a range) and ``gradcli steps`` (the error of
finite differences against the step): pictures in the terminal or in a PNG/SVG file, or their data
as JSON. The plotting libraries are the optional ``plot`` extra; ``--json`` needs neither."""
from __future__ import annotations

import math
import os
import shutil
import sys

import click
import numpy as np

from gradcli.api import prepare
from gradcli.core.parser import parse_expression
from gradcli.verdict.diagnose import diagnose
from gradcli.verdict.point import PointOptions
from gradcli.core.errors import BadInput
from gradcli.verdict.exit_codes import EXIT_OK, exit_code
from gradcli.core.parser import parse_constant
from gradcli.plotting.data import plot_data, step_data
from gradcli.plotting.render import (
    check_save_path, need, plot_file, plot_terminal, steps_file, steps_terminal)
from gradcli.render.json import dumps
from gradcli.core.assignments import parse_assignments, split_top_level
from gradcli.cli.common import ExpressionCommand, fail
MAX_POINTS = 100_000


def _terminal_size(default=(100, 30)) -> tuple:
    """The terminal's size (COLUMNS/LINES win), or ``default`` when there is none; kept legible."""
    cols, lines = shutil.get_terminal_size(default)
    return max(40, min(cols, 200)), max(20, min(lines - 2, 60))


def _color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _need_libraries(command: str, as_json: bool, save: str | None) -> None:
    """Fail before any work when the picture asked for cannot be drawn."""
    if save is not None:
        check_save_path(save)
        need("matplotlib", command)
    elif not as_json:
        need("plotext", command)


def _fixed_text(values: dict) -> str:
    return ", ".join(f"{k} = {v:.6g}" for k, v in values.items())


def _finish(doc: dict, as_json: bool, message: str = ""):
    """The end of plot and steps: the note on stderr, the document, the exit code of its status."""
    code = exit_code(doc["status"])
    if message:
        click.echo(f"{'note' if code == EXIT_OK else doc['status']}: {message}", err=True)
    if as_json:
        click.echo(dumps(doc))
    sys.exit(code)


# --- gradcli plot ------------------------------------------------------------------------------------

def parse_range(text: str) -> tuple:
    """``--x``: ``"LO:HI"`` or ``"NAME=LO:HI"`` -> (name or None, lo, hi)."""
    name, eq, rng = text.partition("=")
    if not eq:
        name, rng = None, text
    else:
        name = name.strip()
        if not name.isidentifier():
            raise BadInput(f"--x: {name!r} is not a variable name")
    parts = rng.split(":")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise BadInput(f"--x expects LO:HI (such as -3:3 or -pi:pi), got {text!r}")
    try:
        lo, hi = (parse_constant(p.strip()) for p in parts)
    except ValueError as exc:
        raise BadInput(f"--x: {getattr(exc, 'message', exc)}") from None
    if not lo < hi:
        raise BadInput(f"--x: LO must be less than HI, got {lo:g}:{hi:g}")
    if not math.isfinite(float(hi) - float(lo)):  # the samples, LO + k (HI - LO) / (n - 1), would be NaN
        raise BadInput(f"--x: HI - LO overflows float64 ({lo:g}:{hi:g}); narrow the range")
    return name, lo, hi


def free_variable(graph, fixed: dict, var: str | None) -> str:
    """The one variable that varies: ``var`` when given, else the only one ``--at`` leaves free."""
    names = graph.variables
    have = ", ".join(names) or "none"
    if not names:
        raise BadInput("the expression has no variable to plot")
    extra = [k for k in fixed if k not in names]
    if extra:
        raise BadInput(f"--at {extra[0]}: not a variable of the expression (its variables: {have})")
    if var is not None:
        if var not in names:
            raise BadInput(f"{var} is not a variable of the expression (its variables: {have})")
        if var in fixed:
            raise BadInput(f"{var} is the plotted variable; it cannot also be fixed with --at")
    free = [v for v in names if v not in fixed and v != var]
    if var is None:
        if len(free) == 1:
            return free[0]
        if not free:
            raise BadInput("--at fixes every variable: leave out the one to plot (or name it with --var)")
        raise BadInput(f"{' and '.join(free)} are free: plot varies one variable; fix the others with --at "
                       f"(such as --at {free[-1]}=1) or choose one with --var")
    if free:
        raise BadInput(f"no value for {', '.join(free)}: pass --at {free[0]}=VALUE (plot varies only {var})")
    return var


@click.command(cls=ExpressionCommand)
@click.argument("expr")
@click.option("--x", "x_range", required=True, metavar="LO:HI",
              help="The range of the plotted variable: LO:HI (such as -3:3 or -pi:pi), or NAME=LO:HI.")
@click.option("--var", default=None, metavar="NAME",
              help="The plotted variable (default: the only one --at does not fix).")
@click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
              help="The value of every other variable; repeatable, or several as \"y=1, z=2\".")
@click.option("--points", "n", type=int, default=400, show_default=True, help="How many samples over the range.")
@click.option("--save", default=None, metavar="FILE", help="Write the picture to FILE (.png or .svg) instead.")
@click.option("--timeout", type=float, default=5.0, show_default=True,
              help="Seconds sympy may take for the symbolic derivative (0: no limit).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the data as one JSON document (no plotting library needed).")
def plot(expr, x_range, var, at, n, save, timeout, as_json):
    """EXPR and its derivative over a range of one variable.

    The other variables are fixed with --at.

    \b
    Examples:
      gradcli plot "sin(x)" --x -3:3
      gradcli plot "x*exp(-x*y)" --x 0:4 --at y=0.5 --save decay.png
      gradcli plot "log(x)" --x -1:2 --json          # NaN (null) where log is undefined
      gradcli plot "tan(t)" --x t=-pi:pi              # poles are gaps, not vertical lines

    Exit codes: 0 a picture (or data), 2 bad input or a missing plot extra, 3 EXPR is defined nowhere
    on the range.
    """
    try:
        if not 2 <= n <= MAX_POINTS:
            raise BadInput(f"--points must be from 2 to {MAX_POINTS}, got {n}")
        PointOptions.validate(timeout=timeout)
        name, lo, hi = parse_range(x_range)
        if name is not None and var is not None and name != var:
            raise BadInput(f"--x names {name} but --var names {var}: give one")
        graph = parse_expression(expr)
        fixed = parse_assignments(at, parse_constant)
        var = free_variable(graph, fixed, name or var)
        _need_libraries("plot", as_json, save)
    except BadInput as exc:
        fail(exc, as_json)
    data = plot_data(graph, var, lo, hi, fixed, n=n, timeout=timeout or None)
    m = data.f.shape[0]
    labels = ["f"] if m == 1 else [f"f[{j}]" for j in range(m)]
    title = f"{expr}" + (f"   ({_fixed_text(data.fixed)})" if data.fixed else "")
    defined = bool(np.isfinite(data.f).any())
    doc = {"expression": expr, "variables": list(graph.variables), **data.to_dict(),
           "status": "ok" if defined else "undefined"}
    message = "" if defined else f"{expr} is undefined everywhere on {var} = {lo:g}..{hi:g}"
    try:
        if save is not None:
            plot_file(data, save, title, labels)
            doc["saved"] = save
            if not message:
                message = f"wrote {save}"
        elif not as_json:
            width, height = _terminal_size()
            click.echo(plot_terminal(data, title, labels, width, height, _color()))
    except BadInput as exc:
        fail(exc, as_json)
    except OSError as exc:
        fail(BadInput(f"--save: cannot write {save}: {exc.strerror or exc}"), as_json)
    _finish(doc, as_json, message)


# --- gradcli steps -----------------------------------------------------------------------------------

@click.command(cls=ExpressionCommand)
@click.argument("expr")
@click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
              help="The point: every variable's value; repeatable, or several as \"x=1, y=2\".")
@click.option("--wrt", default=None, metavar="NAME", help="The variable to differentiate by (default: the first).")
@click.option("--save", default=None, metavar="FILE", help="Write the picture to FILE (.png or .svg) instead.")
@click.option("--timeout", type=float, default=5.0, show_default=True,
              help="Seconds sympy may take for the reference (0: no limit).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the data as one JSON document (no plotting library needed).")
def steps(expr, at, wrt, save, timeout, as_json):
    """How the error of finite differences depends on the step.

    Forward, central and complex-step differences against the symbolic reference for h from 1e-1 to
    1e-16, on log-log axes. Truncation error falls like h (forward) or h**2 (central), round-off grows
    like 1/h: the V. The step gradcli's central method chooses is marked.

    \b
    Examples:
      gradcli steps "exp(x)" --at x=1
      gradcli steps "sin(x*y)" --at "x=1, y=2" --wrt y --save steps.svg
      gradcli steps "abs(x)*x" --at x=1 --json      # no complex step through abs

    Exit codes: 0 a picture (or data), 2 bad input or a missing plot extra, 3 the derivative is
    undefined or does not exist at the point.
    """
    try:
        PointOptions.validate(timeout=timeout)
        graph, point, warnings = prepare(expr, parse_assignments(at, parse_constant))
        if not graph.variables:
            raise BadInput("the expression has no variable to differentiate by")
        if len(graph.outputs) != 1:
            raise BadInput(f"steps needs a scalar expression; this one has {len(graph.outputs)} values "
                           f"(plot one of them: {split_top_level(expr)[0]!r})")
        wrt = wrt or graph.variables[0]
        if wrt not in graph.variables:
            raise BadInput(f"--wrt {wrt}: not a variable of the expression (its variables: "
                           f"{', '.join(graph.variables)})")
        _need_libraries("steps", as_json, save)
    except BadInput as exc:
        fail(exc, as_json)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    k = graph.variables.index(wrt)
    base = {"expression": expr, "variables": list(graph.variables), "variable": wrt, "point": point}
    found, bad_value, bad_deriv = diagnose(graph, point)
    if bad_value[0] or bad_deriv[0, k]:
        kinds = {d.kind for d in found}
        status = "undefined" if "undefined" in kinds or not found else "nondifferentiable"
        message = next((d.message for d in found if d.kind == status), "the derivative does not exist here")
        _finish({**base, "status": status, "message": message,
                 "diagnostics": [{"kind": d.kind, "op": d.op, "message": d.message} for d in found]},
                as_json, message)
    try:
        data = step_data(graph, point, wrt, timeout=timeout or None)
    except ValueError as exc:
        _finish({**base, "status": "undefined", "message": str(exc)}, as_json, str(exc))
    doc = {**base, **data.to_dict(), "status": "ok"}
    title = f"d/d{wrt} {expr} at {_fixed_text(point)}"
    message = ""
    try:
        if save is not None:
            steps_file(data, save, title)
            doc["saved"] = save
            message = f"wrote {save}"
        elif not as_json:
            width, height = _terminal_size()
            click.echo(steps_terminal(data, title, width, height, _color()))
            click.echo(_steps_summary(data))
    except BadInput as exc:
        fail(exc, as_json)
    except OSError as exc:
        fail(BadInput(f"--save: cannot write {save}: {exc.strerror or exc}"), as_json)
    _finish(doc, as_json, message)


def _steps_summary(data) -> str:
    fmt = lambda v: "n/a" if v is None else f"{v:+.2f}"
    lines = [f"reference ({data.reference_method}): {data.reference!r}",
             f"gradcli's central step: h = {data.chosen_step:.3g}, relative error {data.chosen_error:.2g}"
             f"  (textbook optimum: central {data.optimum['central']:.2g}, forward {data.optimum['forward']:.2g})",
             "slopes (truncation | round-off; expected forward +1 | -1, central +2 | -1):"]
    for name, s in data.slopes.items():
        if data.errors.get(name) is None:
            lines.append(f"  {name:13} unavailable: {data.messages.get(name, '')}")
        else:
            lines.append(f"  {name:13} {fmt(s['truncation'])} | {fmt(s['roundoff'])}")
    return "\n".join(lines)
