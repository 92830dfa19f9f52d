"""The texts of ``NAME=VALUE`` lists (``--at``, ``--domain``, ``--direction``), shared by the command line
and the Python API."""
from __future__ import annotations

from gradcli.core.errors import BadInput


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses and brackets: ``"x=atan2(1, 2), y=3"`` is two items, and
    ``"x=[1,2,3]"`` one (an array, which the caller refuses as a whole)."""
    items, depth, cur = [], 0, []
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
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
            if value.strip().startswith("["):
                raise BadInput(f"{option} {name}: array values are not supported; "
                               + _MANY_POINTS.get(option, "a variable is one number"))
            try:
                point[name] = parse_constant(value.strip())
            except ValueError as exc:
                raise BadInput(f"{option} {name}: {getattr(exc, 'message', exc)}") from None
    return point


#: what to use instead of an array of values, by option
_MANY_POINTS = {"--at": "gradcli differentiates at one point (for many points: gradcli grad --points FILE, "
                        "one row per point, or --batch N --domain)"}


def check_names(variables, point: dict, option: str = "--at") -> None:
    """BadInput when the names of ``point`` are not the ``variables``: a variable without a value (with
    the given name it was probably meant as, ``X`` for ``x``, and the given names that are no variable),
    or, every variable having one, the given names that are no variable."""
    missing = [v for v in variables if v not in point]
    extra = [k for k in point if k not in variables]
    if extra and not missing:
        have = ", ".join(variables) or "none"
        raise BadInput(f"{_names_are_not(extra)} of the expression (its variables: {have})")
    if not missing:
        return
    message = f"no value for {', '.join(missing)}: pass {option} {missing[0]}=VALUE" + (
        " for each" if len(missing) > 1 else "")
    meant = _meant_names(missing, extra)
    if meant:
        case = any(given.lower() == name.lower() for given, name in meant)
        message += (" (did you mean " + " ".join(f"{option} {name}={_shown(point[given])}" for given, name in meant)
                    + "?" + (" names are case-sensitive" if case else "") + ")")
    if extra:
        message += f"; {_names_are_not(extra)} of the expression"
    raise BadInput(message)


def _meant_names(missing, extra) -> list:
    """(given, variable) for each given name that is a variable without a value written in another case
    (``X`` for ``x``) or misspelt (``alpah`` for ``alpha``), each variable meant once."""
    import difflib  # only a mistyped name needs it

    pairs, free = [], list(missing)
    for given in extra:
        same_case = [v for v in free if v.lower() == given.lower()]
        name = (same_case or difflib.get_close_matches(given, free, n=1, cutoff=0.6) or [None])[0]
        if name is not None:
            pairs.append((given, name))
            free.remove(name)
    return pairs


def _names_are_not(names) -> str:
    return f"{', '.join(names)} {'is not a variable' if len(names) == 1 else 'are not variables'}"


def _shown(value) -> str:
    """A given value as it may be written back after ``--at x=``: its shortest exact form."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value) if isinstance(value, (int, float)) else "VALUE"


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
    if items[0].startswith("["):
        raise BadInput(f"{option} takes the components without brackets, such as \"1,0\"")
    out = []
    for item in items:
        try:
            out.append(parse_constant(item))
        except ValueError as exc:
            raise BadInput(f"{option} {item}: {getattr(exc, 'message', exc)}") from None
    return out
