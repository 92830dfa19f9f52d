"""What every command shares: consoles, the one-line error with exit code 2, ``--at`` parsing."""
from __future__ import annotations

import os
import sys

import click
import numpy as np
from rich.console import Console

from ..api import split_top_level
from ..errors import BadInput
from ..exit_codes import exit_code
from ..render.json import dumps, error_document
from .formats import emit


def console(stderr: bool = False) -> Console:
    file = sys.stderr if stderr else sys.stdout
    return Console(file=file, highlight=False, no_color="NO_COLOR" in os.environ or None,
                   width=None if file.isatty() else max(120, Console(file=file).width))


def fail(err: BadInput, as_json: bool = False):
    """Report bad input and leave with exit code 2: one line on stderr, the JSON error on stdout."""
    click.echo(f"error: {err.message}", err=True)
    if err.detail:
        click.echo(err.detail, err=True)
    if as_json:
        extra = {"column": err.column} if err.column is not None else {}
        click.echo(error_document(err.message, **extra))
    sys.exit(exit_code("bad_input"))


class JsonCommand(click.Command):
    """A command whose own usage errors (``--rtol abc``, a missing EXPR) still honour ``--json``:
    click reports them on stderr as usual, and stdout gets the error document, so that a pipeline
    reading stdout always has exactly one JSON document to parse."""

    def parse_args(self, ctx, args):
        options = args[:args.index("--")] if "--" in args else list(args)  # click consumes args
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if "--json" in options:
                click.echo(error_document(exc.format_message()))
            raise


def parse_assignments(values, parse_constant, option: str = "--at") -> dict:
    """``("x=1.5", "y=pi/4, z=2")`` -> {"x": 1.5, "y": 0.785..., "z": 2.0}."""
    point: dict = {}
    for raw in values:
        for item in split_top_level(raw):
            name, eq, value = item.partition("=")
            name = name.strip()
            if not eq or not name or not value.strip():
                raise BadInput(f"{option} expects NAME=VALUE, got {item!r}")
            if not name.isidentifier():
                raise BadInput(f"{option}: {name!r} is not a variable name")
            if name in point:
                raise BadInput(f"{option} gives {name} twice")
            try:
                point[name] = parse_constant(value.strip())
            except ValueError as exc:
                raise BadInput(f"{option} {name}: {getattr(exc, 'message', exc)}") from None
    return point


def parse_direction(values, parse_constant, option: str = "--direction"):
    """``--direction``: ``("1, 0",)`` -> [1.0, 0.0] in variable order, or ``("x=1, y=0",)`` -> a dict
    by name (variables not named are 0). Components may be constant expressions (``pi/4``, ``-1``)."""
    items = [item for raw in values for item in split_top_level(raw)]
    if not items:
        raise BadInput(f"{option} expects numbers (\"1,0\") or NAME=VALUE pairs (\"x=1, y=0\")")
    named = ["=" in item for item in items]
    if all(named):
        return parse_assignments(values, parse_constant, option=option)
    if any(named):
        raise BadInput(f"{option}: give every component by position (\"1,0\") or every one by name "
                       "(\"x=1, y=0\"), not a mix")
    out = []
    for item in items:
        try:
            out.append(parse_constant(item))
        except ValueError as exc:
            raise BadInput(f"{option} {item}: {getattr(exc, 'message', exc)}") from None
    return out


def point_options(methods_help: str):
    """The options every point command shares (grad, hessian): --at, --method, --rtol, --atol, --timeout."""
    def decorate(f):
        for option in reversed((
            click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
                         help="A variable's value; repeatable, or several as \"x=1, y=2\". VALUE may be a "
                              "constant expression such as pi/4."),
            click.option("--method", "-m", "methods", multiple=True, metavar="NAME",
                         help=f"Methods to show (repeatable or comma-separated): {methods_help}. Default: all."),
            click.option("--rtol", type=float, default=None,
                         help="Relative tolerance for every method (default: per method)."),
            click.option("--atol", type=float, default=None, help="Absolute tolerance for every method (default 0)."),
            click.option("--timeout", type=float, default=5.0, show_default=True,
                         help="Seconds sympy may take before the symbolic method is reported unavailable."),
        )):
            f = option(f)
        return f
    return decorate


def run_and_print(compare, render, graph, point, warnings, as_json: bool, fmt, timeout, hessian=False, **options):
    """The end every point command shares: warnings on stderr, the comparison, then JSON, a --format
    or the rich table on stdout, and the report's exit code."""
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    # overflow and domain errors are reported by the diagnostics, not as numpy RuntimeWarnings on stderr
    with np.errstate(all="ignore"):
        report = compare(graph, point, warnings=warnings, timeout=timeout, **options)
    if as_json:
        click.echo(dumps(report.to_dict()))
    elif fmt:
        emit(fmt, report, graph, timeout, **({"hessian": True} if hessian else {}))
    else:
        console().print(render(report))
    sys.exit(report.exit_code)

