"""JUnit XML for ``gradcli check --junit FILE``: one testcase per check, written atomically.

``fail`` and ``inconclusive`` are <failure> (CI must not pass what was not verified), ``error`` is
<error>, ``skipped``, ``nondifferentiable`` and ``undefined`` are <skipped> with the reason (nothing
could be checked there; the exit code still says 3). A file that cannot be imported is an <error>
testcase named after the file. A run that a signal stopped has one more <error> testcase, named
``gradcli check``, that says so: the checks it lists are not the whole run, and CI must not pass it.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

from gradcli.checks.collect import uses_gradcli
from gradcli.checks.result import CheckReport
from gradcli.core.errors import BadInput
from gradcli.core.files import atomic_write, output_target
from gradcli.render.check import result_text

# XML 1.0 cannot hold most control characters, even escaped; a user's message may contain them
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text) -> str:
    return _INVALID_XML.sub("\ufffd", str(text))


def classname(file: str) -> str:
    """``examples/bugs/axis.py`` -> ``examples.bugs.axis`` (how CI dashboards group testcases)."""
    stem = os.path.splitext(file)[0].replace("\\", "/").strip("/")
    return ".".join(p for p in stem.split("/") if p not in ("", ".", "..")) or "gradcli"


#: how every file :func:`junit_xml` writes begins
_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="gradcli check"'
#: the testcase that carries a run's own errors (refused, stopped), named as no check can be
RUN_CASE = "gradcli check"


def junit_xml(report: CheckReport, seconds: float = 0.0) -> str:
    summary = report.summary()  # the --json summary: JUnit's counts are made of the same numbers
    failures = summary["failed"] + summary["inconclusive"]
    errors = summary["errors"] + report.interrupted  # with the files that could not be collected
    skipped = summary["skipped"] + summary["nondifferentiable"] + summary["undefined"]
    tests = len(report.checks) + len(report.errors) + report.interrupted
    suites = ET.Element("testsuites", name="gradcli check", tests=str(tests),
                        failures=str(failures), errors=str(errors), skipped=str(skipped), time=f"{seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name="gradcli check",
                          tests=suites.get("tests"), failures=str(failures), errors=str(errors),
                          skipped=str(skipped), time=f"{seconds:.3f}")
    for e in report.errors:
        case = ET.SubElement(suite, "testcase", name=_clean(e["file"]), classname=_clean(classname(e["file"])),
                             file=_clean(e["file"]), time="0")
        if e.get("line") is not None:
            case.set("line", str(e["line"]))
        err = ET.SubElement(case, "error", message=_clean(e["message"]), type="collection")
        err.text = _clean(f"{e['file']}: {e['message']}")
    for r in report.checks:
        case = ET.SubElement(suite, "testcase", name=_clean(r.name), classname=_clean(classname(r.file)),
                             file=_clean(r.file), line=str(r.line or 0), time=f"{r.seconds:.3f}")
        message = _clean(f"{r.status}: {r.message}" if r.message else r.status)
        if r.status in ("fail", "inconclusive"):
            el = ET.SubElement(case, "failure", message=message, type=r.status)
            el.text = _clean(result_text(r))
        elif r.status == "error":
            el = ET.SubElement(case, "error", message=message, type="error")
            el.text = _clean(result_text(r))
        elif r.status in ("skipped", "nondifferentiable", "undefined"):
            ET.SubElement(case, "skipped", message=message, type=r.status)
        if r.notes:
            out = ET.SubElement(case, "system-out")
            out.text = _clean("\n".join(r.notes))
    if report.interrupted:
        ran = len(report.checks)
        message = f"stopped by a signal before the run finished; {ran} check{'s' if ran != 1 else ''} ran"
        case = ET.SubElement(suite, "testcase", name=RUN_CASE, classname=RUN_CASE, time=f"{seconds:.3f}")
        ET.SubElement(case, "error", message=message, type="interrupted").text = message
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def junit_target(path: str, inputs=()) -> str:
    """The file ``--junit PATH`` writes (:func:`gradcli.core.files.output_target`, the rule every output
    option shares); ``inputs`` are the model files being checked."""
    return output_target(path, "--junit", inputs)


def stopped_junit_target(path: str, inputs=()) -> str | None:
    """Where a run stopped before ``--junit PATH`` was checked against the model files (a folder's are
    not all known yet) writes its report: the file :func:`junit_target` names, unless it is a file that
    a folder's walk could take for a model (it uses gradcli and is no gradcli JUnit report), which is
    left alone (None), as is anything junit_target refuses."""
    try:
        real = junit_target(path, inputs)
    except BadInput:
        return None
    if not os.path.exists(real) or uses_gradcli(real) is False:
        return real
    try:
        with open(real, "rb") as fh:
            head = fh.read(len(_HEAD.encode()))
    except OSError:
        return None
    return real if head == _HEAD.encode() else None


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`gradcli.core.files.atomic_write`)."""
    with atomic_write(path) as fh:
        fh.write(text)
