"""``--format markdown|latex`` for ``gradcli grad`` and ``gradcli hessian``: the option, its checks, and
the output (the sympy expressions LaTeX needs come from the graph, never from the user's text)."""
from __future__ import annotations

import click

from gradcli.core.errors import BadInput
from gradcli.methods import symbolic
from gradcli.render import formats
from gradcli.render.formats import FORMATS

format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMATS, case_sensitive=False), default=None,
    help="Print the result as markdown (a pipe table) or LaTeX (tabular, sympy's latex of the derivatives) "
         "to paste into notes and papers, instead of the table. Excludes --json.")


def check_format(fmt, as_json: bool, batch: bool = False) -> None:
    """--format and --json exclude each other; batch mode has no --format."""
    if fmt and as_json:
        raise BadInput("--format and --json exclude each other: give one")
    if fmt and batch:
        raise BadInput("--format applies at one point (--at), not in batch mode")


def _expressions(graph, timeout, order: int):
    """(outputs, derivatives) as sympy expressions: first derivatives [output][variable], or for
    ``order=2`` the Hessian [i][j] of the single output; (None, None) when sympy cannot."""
    res = symbolic.derivatives(graph, timeout or None)
    if res.status != "ok":
        return None, None
    if order == 1:
        return res.function_values, res.derivatives
    syms = symbolic.symbols_of(graph)
    try:
        with symbolic.time_limit(timeout or None):
            H = symbolic.second_derivatives(res.derivatives[0], [syms[v] for v in graph.variables])
    except (symbolic.SymbolicTimeout, RecursionError, MemoryError, TypeError, ValueError, ArithmeticError):
        return res.function_values, None
    return res.function_values, H


def emit(fmt: str, report, graph, timeout, hessian: bool = False) -> None:
    fmt = fmt.lower()
    if fmt == "markdown":
        text = formats.hessian_markdown(report) if hessian else formats.grad_markdown(report)
    else:
        functions, exprs = _expressions(graph, timeout, 2 if hessian else 1)
        text = (formats.hessian_latex(report, exprs, functions) if hessian
                else formats.grad_latex(report, exprs, functions))
    click.echo(text, nl=False)
