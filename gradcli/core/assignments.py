"""The texts of ``NAME=VALUE`` lists (``--at``, ``--domain``, ``--direction``), shared by the command line
and the Python API."""
from __future__ import annotations

from gradcli.core.errors import BadInput


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses: ``"x=atan2(1, 2), y=3"`` is two items."""
    items, depth, cur = [], 0, []
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == sep and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


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
