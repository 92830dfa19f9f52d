"""gradcli's pytest plugin (entry point ``pytest11``): gradient checks as pytest tests.

Two ways in:

- ``pytest --gradcli models/ model.py``: every model file given on the command line (or found in a
  folder given there) becomes a pytest file with one test per registered check, named after it.
  Only files named on the command line are touched: ``pytest --gradcli`` alone collects no models, and
  pytest's own test files (``test_*.py``) are never taken for models.
- ``@pytest.mark.gradcli("models/mlp.py", "models/attn/", k="not slow")`` on a test function runs
  those checks (paths relative to pytest's rootdir) when the test runs; the test fails if any check
  does, with every failing check's report.

A check passes as a test when its status is ``pass``; ``skipped`` is a pytest skip; every other
status fails the test, ``nondifferentiable``/``undefined`` included (pytest has no exit code 3, and a
check that could not be evaluated at its inputs verified nothing).

The plugin is loaded in every pytest run where gradcli is installed, so it imports nothing heavy
until it is used.
"""
from __future__ import annotations

import fnmatch
import os
import sys

import pytest

from gradcli.core.errors import BadInput


def pytest_addoption(parser):
    group = parser.getgroup("gradcli", "gradient checks (gradcli)")
    group.addoption("--gradcli", action="store_true", default=False,
                    help="collect the gradcli model files (and folders) given on the command line: one test "
                         "per check registered with @gradcli.check")


def pytest_configure(config):
    config.addinivalue_line("markers", "gradcli(*paths, k=None): run the gradcli checks registered in these "
                                       "model files or folders (relative to the rootdir); fail if any fails")


def _explicit_roots(config) -> list:
    roots = []
    for arg in config.args:
        path = arg.split("::")[0]
        path = path if os.path.isabs(path) else os.path.join(str(config.invocation_params.dir), path)
        if os.path.exists(path):
            roots.append(os.path.realpath(path))
    return roots


def _is_model(file_path, config) -> bool:
    if file_path.suffix != ".py" or file_path.name in ("conftest.py", "setup.py", "__init__.py"):
        return False
    if any(fnmatch.fnmatch(file_path.name, pat) for pat in config.getini("python_files")):
        return False  # pytest's own test modules
    real = os.path.realpath(file_path)
    roots = config.stash.setdefault(_ROOTS, None) or _explicit_roots(config)
    config.stash[_ROOTS] = roots
    if not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        return False
    from gradcli.checks.collect import uses_gradcli  # as gradcli check's walk decides: bounded, regular files

    return uses_gradcli(str(file_path)) is not False  # a message (too large) is reported as the file's error


_ROOTS = pytest.StashKey[list]()


def pytest_collect_file(file_path, parent):
    # a file named on the command line goes through pytest_pycollect_makemodule below instead
    if (parent.config.getoption("gradcli") and not parent.session.isinitpath(file_path)
            and _is_model(file_path, parent.config)):
        return GradcliFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    """pytest imports every .py file named on the command line as a test module; a model file named
    there is collected as checks instead (and imported once, by gradcli)."""
    if parent.config.getoption("gradcli") and _is_model(module_path, parent.config):
        return GradcliFile.from_parent(parent, path=module_path)
    return None


class GradcliFile(pytest.File):
    """A model file: one item per check it registers."""

    def collect(self):
        specs, errors = _session().collect([str(self.path)])
        if errors and all(_session().needs_extra(e) for e in errors):
            # a framework that is not installed: one failing test naming the extra, and the session goes
            # on (a collection error would stop every other file's checks)
            yield MissingExtra.from_parent(self, name=self.path.name, message=errors[0]["message"])
            return
        if errors:
            raise self.CollectError("; ".join(f"{e['file']}: {e['message']}" for e in errors))
        self.defaults = _defaults(str(self.path))
        self.results = None
        for spec in specs:
            yield GradcliItem.from_parent(self, name=spec.name, spec=spec, defaults=self.defaults)

    def result_of(self, spec):
        """The check's result from one run of this file in a model process of its own, as ``gradcli check``
        runs it (the first item run starts it): a check that ends its process (``os._exit(0)``, a
        segfault) is an error there, and cannot end pytest with the exit status it chose."""
        if self.results is None:
            report = _isolated().run_files([str(self.path)], None, self.defaults, timeout=_NO_LIMIT,
                                           on_output=_to_stdout)
            self.results = {}
            for r in report.checks:
                self.results.setdefault(r.name, r)
            self.errors = report.errors
        result = self.results.get(spec.name)
        if result is None:  # the model process could not import the file this time
            pytest.fail("gradcli: " + ("; ".join(f"{e['file']}: {e['message']}" for e in self.errors)
                                       or f"no result for {spec.name}"), pytrace=False)
        return result


class MissingExtra(pytest.Item):
    """A model file that imports a framework gradcli supports that is not installed here."""

    def __init__(self, *, message, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def runtest(self):
        pytest.fail(f"gradcli: {self.message}", pytrace=False)

    def reportinfo(self):
        return self.path, 0, f"gradcli {self.name}"


class CheckFailed(Exception):
    """A check that did not pass; carries its results for the report."""

    def __init__(self, results):
        super().__init__(f"{len(results)} gradcli check(s) did not pass")
        self.results = results


class GradcliItem(pytest.Item):
    def __init__(self, *, spec, defaults, **kwargs):
        super().__init__(**kwargs)
        self.spec, self.defaults = spec, defaults

    def runtest(self):
        result = self.parent.result_of(self.spec)
        if result.status == "skipped":
            pytest.skip(result.message or "skipped")
        if result.status != "pass":
            raise CheckFailed([result])

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CheckFailed):
            return _describe(excinfo.value.results)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, max(self.spec.line - 1, 0), f"gradcli check {self.name}"


def _session():
    """gradcli's checking machinery, imported on first use: the plugin is loaded by every pytest run."""
    from gradcli.checks import session

    return session


def _isolated():
    from gradcli.checks.process import isolated

    return isolated


#: the plugin's checks have no time limit (pytest-timeout and the like are the user's choice)
_NO_LIMIT = float("inf")


def _to_stdout(data: bytes) -> None:
    """The model process's output, to the test's captured output."""
    sys.stdout.write(data.decode("utf-8", "replace"))


def _describe(results) -> str:
    """Each check's report; the first line says what is wrong, as pytest's short summary shows only it."""
    from gradcli.render.check import headline, result_text

    details = "\n\n".join(result_text(r) for r in results)
    if len(results) == 1:
        return details
    wrong = "; ".join(f"{r.name}: {headline(r)}" for r in results)
    return f"{len(results)} gradcli checks did not pass: {wrong}\n\n{details}"


def _defaults(path: str) -> dict:
    try:
        return _session().load_defaults(path)
    except BadInput as exc:
        raise pytest.UsageError(f"gradcli: {exc.message}") from None


_MARK_USAGE = '@pytest.mark.gradcli("models/m.py", "models/", k="not slow")'


def _check_marker(marker) -> None:
    """Fail the test with one line when the marker's arguments are not paths (and an optional ``k``)."""
    def what(value):
        return f"{value!r} ({type(value).__name__})"

    if not marker.args:
        pytest.fail(f"@pytest.mark.gradcli needs at least one model file or folder: {_MARK_USAGE}", pytrace=False)
    for arg in marker.args:
        if not isinstance(arg, str) and not (isinstance(arg, os.PathLike) and isinstance(os.fspath(arg), str)):
            pytest.fail(f"@pytest.mark.gradcli takes model files or folders as str or pathlib paths, "
                        f"got {what(arg)}: {_MARK_USAGE}", pytrace=False)
    unknown = sorted(set(marker.kwargs) - {"k"})
    if unknown:
        pytest.fail(f"@pytest.mark.gradcli got an unknown keyword {unknown[0]!r} (it takes only k): {_MARK_USAGE}",
                    pytrace=False)
    k = marker.kwargs.get("k")
    if k is not None and not isinstance(k, str):
        pytest.fail(f"@pytest.mark.gradcli's k is a -k expression (str), got {what(k)}: {_MARK_USAGE}", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker("gradcli")
    if marker is None:
        return
    _check_marker(marker)
    session = _session()
    root = str(item.config.rootpath)
    paths = [p if os.path.isabs(p) else os.path.join(root, p) for p in map(os.fspath, marker.args)]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        pytest.fail(f"gradcli: {missing[0]}: no such file or directory", pytrace=False)
    pattern = marker.kwargs.get("k")
    specs, errors = session.collect(paths, pattern)
    if errors:
        pytest.fail("gradcli: " + "; ".join(f"{e['file']}: {e['message']}" for e in errors), pytrace=False)
    if not specs:
        pytest.fail(f"gradcli: no check matches -k {pattern!r}" if pattern else "gradcli: no checks", pytrace=False)
    # in model processes, as the CLI runs them: a check that ends its process cannot end pytest
    results = _isolated().run_files(paths, pattern, _defaults(paths[0]), timeout=_NO_LIMIT,
                                    on_output=_to_stdout).checks
    bad = [r for r in results if r.status not in ("pass", "skipped")]
    if bad:
        pytest.fail(_describe(bad), pytrace=False)
