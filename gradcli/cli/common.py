"""What every command shares: consoles, the one-line error with exit code 2, ``--at`` parsing."""
from __future__ import annotations

import os
import re
import shlex
import sys

import click
import numpy as np

# the commands import these from here
from gradcli.core.errors import BadInput
from gradcli.core.signals import stops_resumed
from gradcli.cli import JSON_META
from gradcli.verdict.exit_codes import exit_code
from gradcli.render.json import dumps, error_document
from gradcli.render.screen import Screen
from gradcli.cli.formats import emit


def console() -> Screen:
    """Standard output, where every report is printed."""
    return Screen(sys.stdout)


def progress_console():
    """A rich console on standard error, for the one thing rich still draws: a progress bar (imported
    only when a bar is shown, so that no other run pays for rich's console)."""
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False, no_color="NO_COLOR" in os.environ or None)


def fail(err: BadInput, as_json: bool = False):
    """Report bad input and leave with exit code 2: one line on stderr, the JSON error on stdout."""
    click.echo(f"error: {err.message}", err=True)
    if err.detail:
        click.echo(err.detail, err=True)
    if as_json:
        extra = {"column": err.column} if err.column is not None else {}
        click.echo(error_document(err.message, **extra))
    sys.exit(exit_code("bad_input"))


#: what an option name cannot hold but an expression may (``-x**2``, ``--x*y``, ``-(x+1)``)
_EXPRESSION_CHARS = re.compile(r"[^\w=-]")


def expression_hint(exc: click.UsageError, args: list) -> str:
    """For a command whose argument is an expression: when its error (an unknown option, a missing
    EXPR) comes from an expression that starts with '-' and was read as an option, the sentence that
    says to put the expression after ``--``; else ""."""
    command = exc.ctx.command if exc.ctx is not None else None
    if command is None or not any(isinstance(p, click.Argument) and p.name == "expr" for p in command.params):
        return ""
    if isinstance(exc, click.NoSuchOption):
        token = next((a for a in args if a == exc.option_name or a.startswith(exc.option_name)), exc.option_name)
        # `--bogus` is a mistyped option; `--x**2` or a lone `-x` can only be an expression
        if token.startswith("--") and not _EXPRESSION_CHARS.search(token.lstrip("-")):
            return ""
    elif isinstance(exc, click.MissingParameter) and exc.param is not None and exc.param.name == "expr":
        # `-m*x`: the option -m with the value *x, and no expression left
        token = next((a for a in args if a.startswith("-") and not a.startswith("--") and len(a) > 2), None)
        if token is None:
            return ""
    else:
        return ""
    return (f"If {token} is the expression, put it after --: {exc.ctx.command_path} -- {shlex.quote(token)} "
            "(options may come before or after it).")


_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*\s*=")


def assignment_hint(exc: click.UsageError, args: list) -> str:
    """For a command with ``--at``: when click found extra arguments and some read as ``NAME=VALUE``
    (``grad "x**2" x=1``), the sentence that says values go after ``--at``; else ""."""
    command = exc.ctx.command if exc.ctx is not None else None
    if command is None or not any(p.name == "at" for p in command.params):
        return ""
    extra = re.match(r"Got unexpected extra arguments? \((.*)\)$", exc.message or "", re.S)
    if extra is None:
        return ""
    values = [a for a in args if _ASSIGNMENT.match(a) and a in extra.group(1)]
    if not values:
        return ""
    return "Values go after --at: " + " ".join(f"--at {shlex.quote(v)}" for v in values)


class JsonCommand(click.Command):
    """A command whose own usage errors (``--rtol abc``, a missing EXPR) still honour ``--json``:
    click reports them on stderr as usual, and stdout gets the error document, so that a pipeline
    reading stdout always has exactly one JSON document to parse (a stop signal's too: gradcli.cli).

    A stop signal that came while the command was loaded (deferred by the group) is raised when it
    starts; a command that sets ``reports_stops`` takes it in its own code instead (``stops_resumed``
    first thing), to report it in its own way."""

    reports_stops = False

    def invoke(self, ctx):
        ctx.meta[JSON_META] = bool(ctx.params.get("as_json"))
        if self.reports_stops:
            return super().invoke(ctx)
        with stops_resumed():
            return super().invoke(ctx)

    def parse_args(self, ctx, args):
        options = args[:args.index("--")] if "--" in args else list(args)  # click consumes args
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            hint = expression_hint(exc, given) or assignment_hint(exc, given)
            if hint:  # MissingParameter puts its message after its own text, on the same line
                exc.message = (exc.message + "\n" if exc.message else "") + hint
            if "--json" in options:
                click.echo(error_document(exc.format_message()))
            raise


class ExpressionCommand(JsonCommand):
    """A JsonCommand whose argument is an expression, which may start with '-' (``-x**2``): a token that
    starts with one '-' and is no option of the command is the expression, and ``--`` makes the next
    token the expression whatever it looks like (``-- -h``); options may follow it either way. A first
    ``-h`` followed by ``--at`` is the expression ``-h`` at that point, not a request for help."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self.expression_last(ctx, list(args)))

    def expression_last(self, ctx, args: list) -> list:
        """``args`` with the expression moved behind a final ``--``, where click reads it as the argument."""
        takes_value, flags = set(), set()
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                names = param.opts + param.secondary_opts
                (flags if param.is_flag or param.count else takes_value).update(names)
        out, expressions, i = [], [], 0
        help_names = set(ctx.help_option_names)
        if args and args[0] in help_names and "-" + args[0].lstrip("-") == args[0] and any(
                a == "--at" or a.startswith("--at=") for a in args[1:]):
            # `grad -h --at h=2`: an expression -h with its point, not a request for help (which is
            # `grad -h` alone, or -h after the expression)
            expressions.append(args[0])
            i = 1
        while i < len(args):
            token = args[i]
            if token == "--" and i + 1 < len(args):
                expressions.append(args[i + 1])
                i += 2
                continue
            name = token.partition("=")[0] if token.startswith("--") else token[:2]
            # -m*x is the expression -m*x: no option value holds an operator (-mforward is an option)
            arithmetic = not token.startswith("--") and any(c in token[2:] for c in "*/^()+")
            if (token in flags or name in takes_value) and not arithmetic:
                # an option; its value is the next token unless attached (--rtol=-1, -mforward)
                attached = "=" in token if token.startswith("--") else len(token) > 2
                step = 1 if token in flags or attached else 2
                out.extend(args[i:i + step])
                i += step
                continue
            if token.startswith("-") and not token.startswith("--") and len(token) > 1:
                expressions.append(token)  # -x**2, -1/x: not an option, so the expression
            else:
                out.append(token)
            i += 1
        return out + (["--", *expressions] if expressions else [])


def method_completion(names):
    """A shell_complete callback for -m/--method over ``names``: in a comma list (``forward,re``) the last
    item is completed and the ones before it kept, and a method already in the list is not offered again."""
    def complete(ctx, param, incomplete: str):
        done, _, last = incomplete.rpartition(",")
        given = {n.strip().lower().replace("-", "_") for n in done.split(",")}
        prefix = last.strip().lower().replace("-", "_")
        lead = done + "," if done else ""
        from click.shell_completion import CompletionItem  # only a completing shell needs it

        return [CompletionItem(lead + n) for n in names
                if n.startswith(prefix) and n not in given]
    return complete


def point_options(methods_help: str):
    """The options every point command shares (grad, hessian): --at, --method, --rtol, --atol, --timeout.
    ``methods_help`` lists the command's methods, comma-separated: the help shows it, the shell completes them."""
    names = [n.strip() for n in methods_help.split(",")]

    def decorate(f):
        for option in reversed((
            click.option("--at", "at", multiple=True, metavar="NAME=VALUE",
                         help="A variable's value; repeatable, or several as \"x=1, y=2\". VALUE may be a "
                              "constant expression such as pi/4."),
            click.option("--method", "-m", "methods", multiple=True, metavar="NAME",
                         shell_complete=method_completion(names),
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

