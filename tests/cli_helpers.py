"""What the CLI tests share: a runner that keeps stdout and stderr apart, a colour-free environment,
and a JSON parser that rejects NaN and Infinity (the contract says null)."""
import json

from click.testing import CliRunner

try:  # click < 8.2 mixes stderr into stdout unless told not to
    RUNNER = CliRunner(mix_stderr=False)
except TypeError:
    RUNNER = CliRunner()

PLAIN_ENV = {"FORCE_COLOR": None, "NO_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None}


def _reject(name):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    return json.loads(text, parse_constant=_reject)
