"""The command line: a thin click layer over the reports. One module per command."""
from __future__ import annotations

import click

from .. import __version__
from .check import check
from .explain import explain
from .grad import grad
from .hessian import hessian
from .plot import plot, steps


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


main.add_command(grad)
main.add_command(hessian)
main.add_command(check)
main.add_command(plot)
main.add_command(steps)
main.add_command(explain)
