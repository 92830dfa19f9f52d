"""How a framework target's inputs reach its parameters: by name where every input names one, by
position in the order given where none does (a module's ``forward(input)`` given ``x=...``)."""
from __future__ import annotations

import inspect

from gradcli.core.errors import BadInput


def bind(params, names: list, what: str):
    """How inputs reach a target with parameters ``params`` (inspect.Parameter list, or None where
    unknown) -> the parameters to bind by name (every input names one), or None to pass them by position
    in the order given (no input names one, or the target takes *args). BadInput for a required parameter
    left without a value, or a mix of known and unknown names (a typo)."""
    if params is None:
        return None
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)]
    known = {p.name for p in named}
    if all(n in known for n in names):
        missing = [p.name for p in named if p.default is p.empty and p.name not in names]
        if missing:
            raise BadInput(f"no value for parameter {missing[0]!r} of {what}: "
                           f"pass {missing[0]}=value or a shape such as {missing[0]}=(3,)")
        return named
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in named if p.kind is not p.KEYWORD_ONLY]
    if not any(n in known for n in names) and len(names) <= len(positional):
        return None  # no name matches (a module's forward(input) given x=...): by position, in the order given
    unknown = next(n for n in names if n not in known)
    listed = ", ".join(p.name for p in named) or "none"
    raise BadInput(f"{what} has no parameter {unknown!r} (its parameters: {listed})")


def signature_parameters(fn, drop_first: bool = False):
    """``fn``'s parameters (less the first, for a Function's ctx), or None where it has no signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins such as torch.sin
        return None
    return params[1:] if drop_first and params else params


def call_bound(target, bound, values: dict, keywords: bool = True):
    """``target`` called with ``values`` as ``bind`` decided: by position in the order given, by name,
    or by position in the signature's order with its defaults where not given (``keywords=False``, as
    Function.apply takes no keywords, or a signature with positional-only parameters, as jnp.sin's)."""
    if bound is None:
        return target(*values.values())
    if keywords and not any(p.kind is p.POSITIONAL_ONLY for p in bound):
        return target(**values)
    return target(*[values[p.name] if p.name in values else p.default for p in bound])


def selected(out, output):
    """The output a check differentiates: ``out[output]`` (default 0) of a tuple or list, else ``out``."""
    if isinstance(out, (tuple, list)):
        return out[0 if output is None else output]
    return out
