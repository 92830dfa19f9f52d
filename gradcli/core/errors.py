"""The one exception for input the user must fix (CLI: one line on stderr, exit code 2)."""
from __future__ import annotations


class BadInput(ValueError):
    """Bad input: ``message`` is one line; ``detail`` may add the expression with a caret under ``column``."""

    def __init__(self, message: str, detail: str = "", column: int | None = None):
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.column = column
