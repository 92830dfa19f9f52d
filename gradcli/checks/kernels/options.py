"""The options of a kernel check (``reference=``), validated where every option is (gradcli.checks.registry)."""
from __future__ import annotations

import math

from gradcli.core.errors import BadInput

#: the kernel's error may be this many times the same-dtype reference's (FlashAttention's tests use 2)
FACTOR = 2.0
#: options that mean nothing for a kernel check (it compares three runs, not derivatives)
REFUSED = ("mode", "taylor", "autocast", "nondet_tol", "with_grad", "eps", "rtol")


def validate(options: dict, grad=None, vjp=None, hvp=None) -> None:
    """BadInput for what a kernel check cannot take (at registration and before it runs)."""
    if not callable(options.get("reference")):
        raise BadInput(f"reference= takes a function (the plain implementation), got "
                       f"{type(options.get('reference')).__name__}")
    if grad is not None or vjp is not None or hvp is not None:
        raise BadInput("reference= compares the kernel's own backward with the reference's: drop grad=/vjp=/hvp=")
    given = [k for k in REFUSED if options.get(k) is not None]
    if given:
        raise BadInput(f"{given[0]}= does not apply with reference= (the tolerance is measured from the "
                       "reference in the kernel's dtype; factor= scales it)")
    if options.get("order") not in (None, 1):
        raise BadInput("order=2 does not apply with reference= (the kernel's backward is compared, not its "
                       "derivative)")
    factor = options.get("factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                               or not 1 <= factor < math.inf):
        raise BadInput(f"factor must be a number >= 1 (how many times the reference's error the kernel may "
                       f"make), got {factor!r}")
