"""The ``--json`` documents: exactly one JSON object, with null for every non-finite number."""
from __future__ import annotations

import json


def dumps(doc: dict) -> str:
    # allow_nan=False: a stray inf/nan must fail loudly here rather than emit invalid JSON
    return json.dumps(doc, indent=2, allow_nan=False)


def error_document(message: str, **extra) -> str:
    return dumps({"status": "error", "error": message, **extra})
