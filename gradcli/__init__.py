"""gradcli: a gradient calculator and checker.

``gradcli.grad(expr, **point)`` compares forward mode, reverse mode, finite differences and sympy at
a point; see the README for the command line.
"""
__version__ = "0.1.0"

from .api import grad, hessian  # noqa: E402
from .errors import BadInput  # noqa: E402
from .batch.compiled import compile  # noqa: E402,A004
from .batch.api import grad_batch  # noqa: E402
from .checks.registry import check  # noqa: E402

__all__ = ["grad", "hessian", "compile", "grad_batch", "check", "BadInput", "__version__"]
