"""``[tool.gradcli]`` defaults for ``gradcli check`` from the nearest pyproject.toml above a path.

``load_defaults(path) -> dict`` walks up from ``path`` (a file or a folder) to the first folder with a
``pyproject.toml`` and returns its ``[tool.gradcli]`` table (``{}`` when there is none, or when that
file has no such table: the search stops at the first pyproject.toml, which is the project's). Keys are
the check options (``atol rtol eps seed dtype mode domain wrt output with_grad order taylor``; ``-`` may be
written for ``_``); an unknown key or a bad value is a ValueError (the CLI reports it, exit 2).

TOML is read with ``tomllib`` (Python 3.11+) or ``tomli`` where installed; on Python 3.10 without
``tomli``, defaults from pyproject.toml are not supported and ``{}`` is returned.
"""
from __future__ import annotations

import os

from gradcli.core.errors import BadInput
from gradcli.checks.registry import validate_options
from gradcli.checks.spec import OPTIONS


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
    table = data.get("tool", {}).get("gradcli", {})
    if not isinstance(table, dict):
        raise ValueError(f"{found}: [tool.gradcli] must be a table")
    out = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in OPTIONS:
            raise ValueError(f"{found}: unknown key {key!r} in [tool.gradcli] (known: {', '.join(OPTIONS)})")
        if name == "domain" and isinstance(value, list):
            value = tuple(value)
        out[name] = value
    try:
        validate_options(out)
    except BadInput as exc:
        raise ValueError(f"{found}: [tool.gradcli]: {exc.message}") from None
    return out
