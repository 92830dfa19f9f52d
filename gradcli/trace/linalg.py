"""Differentiation rules: linalg (filled in by its own work; registered by gradcli.trace.routing)."""
from __future__ import annotations


def routes(d) -> dict:
    """numpy (or scipy) callable -> Route, built with ``d(impl)`` (a differentiable route)."""
    return {}
