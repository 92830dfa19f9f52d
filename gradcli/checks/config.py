"""``[tool.gradcli]`` defaults for ``gradcli check`` from the nearest pyproject.toml above a path.

``load_defaults(path) -> dict`` walks up from ``path`` (a file or a folder) to the first folder with a
``pyproject.toml`` and returns its ``[tool.gradcli]`` table (``{}`` when there is none, or when that
file has no such table: the search stops at the first pyproject.toml, which is the project's). Keys are
the check options (``atol rtol eps seed dtype mode domain wrt output with_grad order taylor``) and
``timeout`` (seconds one check may take under ``gradcli check``, a positive number); ``-`` may be written
for ``_``. An unknown key, a bad value, or a ``tool`` that is not a table is a ValueError (the CLI reports
it in one line, exit 2).

TOML is read with ``tomllib`` (Python 3.11+) or ``tomli`` where installed; on Python 3.10 without
``tomli``, defaults from pyproject.toml are not supported and ``{}`` is returned.
"""
from __future__ import annotations

import math
import os

from gradcli.core import options as option_values
from gradcli.core.errors import BadInput
from gradcli.checks.registry import validate_options
from gradcli.checks.spec import OPTIONS

#: Keys of ``[tool.gradcli]`` that are no check option: they govern the run (``gradcli check``).
RUN_KEYS = ("timeout",)
#: Every key ``[tool.gradcli]`` may hold.
#: a check's own only: a reference implementation is a function, which a TOML file cannot hold
CHECK_ONLY = ("reference",)
KEYS = (*(k for k in OPTIONS if k not in CHECK_ONLY), *RUN_KEYS)


def _toml():
    try:
        import tomllib
        return tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli
            return tomli
        except ImportError:
            return None


def find_pyproject(path) -> str | None:
    """The nearest pyproject.toml in ``path``'s folder or above it, or None."""
    here = os.path.abspath(os.fspath(path))
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load_defaults(path) -> dict:
    """The ``[tool.gradcli]`` options that govern ``path`` (see the module docstring)."""
    toml = _toml()
    found = find_pyproject(path)
    if toml is None or found is None:
        return {}
    try:
        with open(found, "rb") as fh:
            data = toml.load(fh)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ValueError(f"{found}: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ValueError(f"{found}: tool must be a table ([tool.gradcli] lives in it), got {_kind(tool)}")
    table = tool.get("gradcli", {})
    if not isinstance(table, dict):
        raise ValueError(f"{found}: [tool.gradcli] must be a table, got {_kind(table)}")
    out = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in KEYS:
            raise ValueError(f"{found}: unknown key {key!r} in [tool.gradcli]{_closest_key(name)} "
                             f"(known: {', '.join(KEYS)})")
        if name == "domain" and isinstance(value, list):
            value = tuple(value)
        out[name] = value
    try:
        validate_options({k: v for k, v in out.items() if k in OPTIONS})
        _validate_project_keys(out)
    except BadInput as exc:
        raise ValueError(f"{found}: [tool.gradcli]: {exc.message}") from None
    return out


def _closest_key(name: str) -> str:
    """``; did you mean 'wrt'?`` for a misspelt key, or ""."""
    import difflib  # only a misspelt key needs it

    close = difflib.get_close_matches(name.lower(), KEYS, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _validate_project_keys(out: dict) -> None:
    option_values.seed(out.get("seed"), "seed")
    if "timeout" in out and not is_time_limit(out["timeout"]):
        raise BadInput(f"timeout must be a positive number of seconds, got {out['timeout']!r}")


def is_time_limit(value) -> bool:
    """Whether ``value`` can be a check's time limit: a positive, finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer beyond float's range: finite, and a limit that never comes
        return value > 0


def _kind(value) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
            list: "an array"}.get(type(value), type(value).__name__)
