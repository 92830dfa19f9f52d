"""The one table from statuses to process exit codes, for every command (docs/contract.md, the command line)."""
from __future__ import annotations

EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_UNDEFINED = 0, 1, 2, 3
#: the user's Ctrl-C (SIGINT) ended the run, as a shell reports it: 128 + 2
EXIT_INTERRUPTED = 130

#: a report's (or a check's) status -> the exit code it asks for
EXIT_CODES = {
    # grad, hessian, grad --batch, explain, plot, steps
    "agree": EXIT_OK,
    "ok": EXIT_OK,
    "disagree": EXIT_MISMATCH,
    "undefined": EXIT_UNDEFINED,
    "nondifferentiable": EXIT_UNDEFINED,
    "ill_conditioned": EXIT_UNDEFINED,
    # check: CI must not pass what was not verified, so inconclusive fails
    "pass": EXIT_OK,
    "skipped": EXIT_OK,
    "fail": EXIT_MISMATCH,
    "error": EXIT_MISMATCH,  # a check's function under test raised
    "inconclusive": EXIT_MISMATCH,
    # input the user must fix, in every command (its JSON error document says "status": "error", but
    # it is no report: the run never started)
    "bad_input": EXIT_BAD_INPUT,
}

#: when several statuses meet (the checks of one run), the first of these codes present wins
PRECEDENCE = (EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_UNDEFINED, EXIT_OK)


def exit_code(*statuses: str) -> int:
    """The exit code for one status, or for several together (the most serious wins). A status
    the table does not know means no verdict was possible: exit 3."""
    codes = {EXIT_CODES.get(s, EXIT_UNDEFINED) for s in statuses}
    return next((c for c in PRECEDENCE if c in codes), EXIT_OK)
