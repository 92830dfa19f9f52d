"""The command line: a thin click layer over the reports. One module per command.

Commands are imported only when one is run or its own help is shown: ``gradcli --help`` lists them
from :data:`COMMANDS` without importing numpy or sympy.

A stop signal (SIGINT, SIGTERM, SIGHUP) ends every command the same way: one line on stderr and the
exit status a shell gives a process the signal ended, 128 + its number (130, 143, 129), with every
temporary file removed and every existing output file untouched.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys

import click

from gradcli import __version__
from gradcli.core.files import discard_pending
from gradcli.core.signals import stop_exit_status, stop_message, stop_pending, stops_deferred, watching_signals

#: command -> (module, function). Listing them reads each function's docstring from its source, so
#: that ``gradcli --help`` shows click's own short help without importing the command.
COMMANDS = {
    "check": ("gradcli.cli.check", "check"),
    "explain": ("gradcli.cli.explain", "explain"),
    "grad": ("gradcli.cli.grad", "grad"),
    "hessian": ("gradcli.cli.hessian", "hessian"),
    "plot": ("gradcli.cli.plot", "plot"),
    "steps": ("gradcli.cli.plot", "steps"),
}


def load_command(name: str) -> click.Command:
    module, attr = COMMANDS[name]
    return getattr(importlib.import_module(module), attr)


def command_docstring(name: str) -> str:
    """A command's docstring, read from its module's source (parsed, never run)."""
    module, attr = COMMANDS[name]
    try:
        with open(importlib.util.find_spec(module).origin, encoding="utf-8") as fh:
            source = fh.read()
        # parse the function alone (from its def to the next line at column 0): a whole module
        # costs ten times as long, and --help lists six commands
        start = re.search(rf"^def {attr}\(", source, re.MULTILINE)
        if start is not None:
            end = _TOP_LEVEL.search(source, start.end())
            tree = ast.parse(source[start.start():end.start() if end else len(source)])
            return ast.get_docstring(tree.body[0]) or ""
    except (OSError, SyntaxError, UnicodeDecodeError):  # an install without sources: import it after all
        pass
    return load_command(name).help or ""


_TOP_LEVEL = re.compile(r"^\S", re.MULTILINE)


def summary(help_text: str, limit: int) -> str:
    """A command's line in the command list: the first sentence of its help, or, where that is longer
    than ``limit``, its longest opening phrase (up to a comma, colon or semicolon) that fits, so that a
    narrow terminal cuts between phrases rather than in the middle of one."""
    sentence = click.Command("", help=help_text).get_short_help_str(1 << 30)
    if len(sentence) <= limit:
        return sentence
    cuts = [m.start() for m in re.finditer(r"[,:;] ", sentence) if m.start() + 3 <= limit]
    if cuts:
        return sentence[:cuts[-1]] + "..."
    return click.Command("", help=help_text).get_short_help_str(limit)


def command_suggestion(name: str) -> str:
    """`` Did you mean 'grad'?`` for a mistyped command name (``gard``), or ""."""
    import difflib  # only a mistyped command needs it

    close = difflib.get_close_matches(name.lower(), sorted(COMMANDS), n=2, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


#: ``ctx.meta`` key (shared by a command's context and the group's): whether the command was given --json
JSON_META = "gradcli.json"


def _stopped(as_json: bool = False):
    """Leave after a stop signal: temporary files removed, one line, exit 128 + the signal; with
    ``--json``, stdout still gets its one document, the error document marked ``interrupted``."""
    with stops_deferred():  # a second signal must not cut this short
        discard_pending()
        try:
            # the blank line closes the terminal's echo of ^C
            ctrl_c = (stop_exit_status() or 130) == 130
            click.echo(("\n" if ctrl_c and sys.stderr.isatty() else "") + stop_message(), err=True)
            if as_json:
                from gradcli.render.json import error_document  # here: it loads numpy, which --help must not

                click.echo(error_document(stop_message(), interrupted=True))
        except (OSError, ValueError):  # after SIGHUP the terminal may be gone: the exit status still tells
            pass
    sys.exit(stop_exit_status() or 130)


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (run, or ``gradcli CMD --help``). A stop signal
    ends any command with its own exit status (:mod:`gradcli.core.signals`), never click's "Aborted!" and 1."""

    def main(self, *args, **kwargs):
        with watching_signals():
            try:
                return super().main(*args, **kwargs)
            except SystemExit as exc:
                # a stop that no command raised or reported (--help, --version, a usage error, a signal
                # while the command's exit unwound) still ends the run as stopped
                if stop_pending() and exc.code != stop_exit_status():
                    _stopped()
                raise
            finally:
                discard_pending()

    def make_context(self, *args, **kwargs):
        # until a command starts, a stop waits (JsonCommand raises it when it starts): only then is it
        # known where this run's report goes
        try:
            with stops_deferred():
                return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            _stopped()

    def parse_args(self, ctx, args):
        if not args and not ctx.resilient_parsing:  # bare `gradcli`: the help, as a success (click says 2)
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            with stops_deferred():  # the command is imported and reads its options (see make_context)
                return super().invoke(ctx)
        except KeyboardInterrupt:
            _stopped(ctx.meta.get(JSON_META, False))

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if exc.message.startswith("No such command"):  # not an unknown option before the command
                exc.message += command_suggestion(args[0])
            raise

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        return load_command(name) if name in COMMANDS else None

    def format_commands(self, ctx, formatter):
        # click would load every command for its short help; the table has it
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, summary(command_docstring(name), limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradcli")
def main():
    """gradcli: what is this gradient, and is it right?

    \b
    Examples:
      gradcli grad "x**2*sin(y)" --at x=1.5 --at y=0.3
      gradcli grad "log(x) + sqrt(x*y)" --at "x=2, y=pi/4" --json
      gradcli grad "x*y, x+y" --at x=1 --at y=2 --method forward,reverse --full
      gradcli hessian "x**2 - y**2" --at "x=0, y=0"
      gradcli check model.py            # the checks a model file registers with @gradcli.check

    Exit codes (every command): 0 all agree (all checks pass), 1 a disagreement (a failed check),
    2 bad input, 3 the gradient is undefined or does not exist at the point. With --json, stdout is
    exactly one JSON document.
    """
