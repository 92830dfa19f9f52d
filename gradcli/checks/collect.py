"""Collecting checks: import model files and take the CheckSpecs each one registers.

Each file is imported under its own module name (derived from its path), so two files that both
define ``loss`` never overwrite each other; the file's folder is on ``sys.path`` while it imports, so
``from helpers import ...`` works as it does when the file is run as a script. Nothing here prints:
an import failure is an error entry with one line of text, never a traceback.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import re
import stat
import sys
import traceback

from gradcli.core.errors import BadInput
from gradcli.checks.process.interrupt import is_user_interrupt, raised_by_user_code
from gradcli.checks.spec import REGISTRY

#: Folders never searched (besides hidden ones and virtual environments, found by their pyvenv.cfg).
SKIP_DIRS = {"__pycache__", "site-packages", "node_modules"}
#: Files in a folder that are never model files.
SKIP_FILES = {"setup.py", "conftest.py", "__init__.py"}
#: The largest model file: a folder's walk reads no more of a file than this to see whether it uses
#: gradcli (before any time limit applies, so its cost must be bounded), and a larger .py file that does,
#: or that is named, is that file's error rather than imported. No hand-written model comes near it.
MAX_SOURCE_BYTES = 16 << 20
_CHUNK = 1 << 20


def is_test_file(name: str) -> bool:
    """Whether pytest would collect the file as tests (or load it as a conftest): ``test_*.py``,
    ``*_test.py``, ``conftest.py``. A folder's walk leaves them alone (importing a project's tests
    runs its fixtures' imports); named on the command line, they are model files like any other."""
    return name == "conftest.py" or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))


def find_files(paths) -> tuple[list, list]:
    """``paths`` (files or folders) -> (model files, errors). Folders are searched recursively, sorted;
    a file found in a folder is a model file only if it is a regular file (or a link to one: a fifo
    or a device is never opened), it imports gradcli (a helper module, a script beside the models or
    one that only names gradcli in a docstring is not imported, let alone reported as registering
    nothing) and pytest would not collect it as tests (:func:`is_test_file`); a regular file named in
    ``paths`` is always taken. Nothing larger than MAX_SOURCE_BYTES is read."""
    files, errors, seen = [], [], set()

    def add(path):
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            files.append(path)

    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            for f in _in_folder(path, errors):
                add(f)
        elif os.path.isfile(path):
            if not path.endswith(".py"):
                errors.append(file_error(path, "not a Python file (.py)"))
            elif os.path.getsize(path) > MAX_SOURCE_BYTES:
                errors.append(file_error(path, _too_large(os.path.getsize(path))))
            else:
                add(path)
        elif os.path.exists(path):
            errors.append(file_error(path, "not a regular file (a fifo or a device has no model to import)"))
        else:
            errors.append(file_error(path, "no such file or directory"))
    return files, errors


def _in_folder(folder: str, errors: list) -> list:
    """The model files found in ``folder`` (see :func:`find_files`); its errors appended to ``errors``."""
    walked = []
    for f in _walk(folder):
        uses = uses_gradcli(f)
        if isinstance(uses, str):
            errors.append(file_error(f, uses))
        elif uses:
            walked.append(f)
    found = [f for f in walked if not is_test_file(os.path.basename(f))]
    if not found:
        tests = len(walked) - len(found)
        skipped = (f"; {tests} test file{'s' if tests != 1 else ''} (test_*.py, *_test.py, conftest.py) "
                   "left alone: name one on the command line to check it") if tests else ""
        errors.append(file_error(folder, "no model files (.py files that use gradcli) in this folder" + skipped))
    return found


def _too_large(size: int) -> str:
    return (f"not imported: {size / (1 << 20):.1f} MiB, larger than any model file gradcli takes "
            f"({MAX_SOURCE_BYTES >> 20} MiB)")


def _walk(top: str):
    out = []
    for root, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                         and not os.path.exists(os.path.join(root, d, "pyvenv.cfg")))
        out.extend(os.path.join(root, n) for n in sorted(names)
                   if n.endswith(".py") and not n.startswith(".") and n not in SKIP_FILES)
    return sorted(out, key=lambda p: os.path.relpath(p, top).split(os.sep))


def uses_gradcli(path: str) -> bool | str:
    """Whether the file at ``path`` imports gradcli, read in chunks up to the first import and never
    beyond MAX_SOURCE_BYTES: False for anything but a regular file (or a link to one), never opened,
    since a fifo would block and /dev/zero never ends; a message for a larger file that does."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        # O_NONBLOCK: a fifo put in its place since the stat must not block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                return False
            if not _mentions_gradcli(fh):
                return False
    except OSError:
        return True  # a dangling link, a file we may not read: let the import report why it cannot be read
    return _too_large(info.st_size) if info.st_size > MAX_SOURCE_BYTES else True


#: A statement that imports gradcli (``import gradcli``, ``import numpy as np, gradcli.api as g``,
#: ``from gradcli import ...``, ``from gradcli.testing import ...``) or an import of it by name
#: (``importlib.import_module("gradcli")``, ``__import__("gradcli")``). A line that only names gradcli
#: in prose, a docstring or a comment does not make a file a model file.
_IMPORTS_GRADCLI = re.compile(
    rb"(?:^|;)[ \t]*(?:from[ \t]+gradcli(?:\.\w+)*[ \t]+import\b"
    rb"|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*gradcli(?:\.\w+)*(?:[ \t]+as[ \t]+\w+)?[ \t]*(?:[,;#\r\n]|$))"
    rb"|(?:import_module|__import__)\([ \t]*[\"']gradcli\b",
    re.MULTILINE)
#: How much of an unfinished line is carried into the next chunk (an import statement is far shorter).
_CARRY = 4096


def _mentions_gradcli(fh) -> bool:
    """Whether the file imports gradcli (:data:`_IMPORTS_GRADCLI`), read in chunks of _CHUNK and never
    beyond MAX_SOURCE_BYTES; the unfinished last line of a chunk is carried into the next."""
    tail, left = b"", MAX_SOURCE_BYTES
    while left > 0:
        chunk = fh.read(min(_CHUNK, left))
        if not chunk:
            return False
        text = tail + chunk
        if _IMPORTS_GRADCLI.search(text):
            return True
        tail, left = text[text.rfind(b"\n") + 1:][-_CARRY:], left - len(chunk)
    return False


def module_name(path: str) -> str:
    """A module name unique to the file's absolute path: ``gradcli_model_<hash>_<stem>``."""
    real = os.path.realpath(path)
    digest = hashlib.sha1(os.fsencode(real)).hexdigest()[:10]
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(real))[0])
    return f"gradcli_model_{digest}_{stem}"


def import_file(path: str) -> tuple[list, dict | None]:
    """Import one model file; -> (the specs it registered, None) or ([], an error entry)."""
    name = module_name(path)
    folder = os.path.dirname(os.path.abspath(path))
    before = len(REGISTRY)
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return [], file_error(path, "cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        module.__gradcli_model__ = True
        sys.modules[name] = module  # dataclasses, pickle and inspect look the module up by name
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any failure in user code is reported, not raised
        if is_user_interrupt(exc):
            sys.modules.pop(name, None)
            del REGISTRY[before:]
            raise
        sys.modules.pop(name, None)
        del REGISTRY[before:]  # half a file's checks would be a misleading report
        return [], import_error(path, exc)
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return list(REGISTRY[before:]), None


def import_error(path: str, exc: BaseException) -> dict:
    """One line for an import failure: the exception, plus where in the user's file it happened."""
    kind = type(exc).__name__
    message = _one_line(exc)
    line, source = None, ""
    if isinstance(exc, SyntaxError) and exc.filename and _same_file(exc.filename, path):
        line, source = exc.lineno, (exc.text or "").strip()
        message = exc.msg
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        own = [f for f in frames if _same_file(f.filename, path)]
        user = [f for f in frames if not _is_internal(f.filename)]
        frame = own[-1] if own else (user[-1] if user else None)
        if frame is not None:
            line, source = frame.lineno, (frame.line or "").strip()
    extra = _missing_framework(exc)
    if extra is not None:  # no traceback's line: the fix is an install, not an edit
        return file_error(path, f"cannot import: {exc.name.split('.')[0]} is not installed; this file needs it: "
                                f"pip install 'gradcli[{extra}]'")
    if isinstance(exc, BadInput):  # gradcli.check refused the registration: the user's mistake, said plainly
        text = f"bad check: {message}"
    elif isinstance(exc, SystemExit):
        text = f"cannot import: the file called sys.exit({exc.code!r}); keep script code under " \
               'if __name__ == "__main__":'
    elif not isinstance(exc, Exception):
        text = f"cannot import: the file raised {raised_by_user_code(exc)}"
    else:
        text = f"cannot import: {kind}: {message}" if message else f"cannot import: {kind}"
    if line is not None:
        text += f" (line {line}{': ' + source if source else ''})"
    return file_error(path, text, line=line)


#: The frameworks gradcli checks, by the top-level module a model file imports -> the extra that installs it.
FRAMEWORK_EXTRAS = {"torch": "torch", "jax": "jax", "jaxlib": "jax", "triton": "triton"}
_NEEDS_EXTRA = re.compile(r"^cannot import: \S+ is not installed; this file needs it: pip install 'gradcli\[(\w+)\]'$")


def _missing_framework(exc: BaseException) -> str | None:
    """The extra to install where ``exc`` is a framework gradcli supports not being installed, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not isinstance(exc.name, str):
        return None
    return FRAMEWORK_EXTRAS.get(exc.name.split(".")[0])


def needs_extra(entry: dict) -> str | None:
    """The extra a file error asks to install (a framework that is not installed), else None: such a file
    is the install's problem, not the file's, and the pytest plugin reports it as a failing test."""
    found = _NEEDS_EXTRA.match(entry.get("message", ""))
    return found.group(1) if found else None


def _one_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        text = ""
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return lines[0] if lines else ""


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (TypeError, ValueError):
        return False


_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "<frozen ")


def _is_internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL) or "importlib" in filename


def file_error(path: str, message: str, line: int | None = None) -> dict:
    """The error entry of a model file (the report's ``errors``): ``{"file", "message"[, "line"]}``."""
    d = {"file": display_path(path), "message": message}
    if line is not None:
        d["line"] = line
    return d


def display_path(path: str) -> str:
    """The path as the user would type it: relative to the working directory when under it."""
    if not path:
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def collect(paths, pattern: str | None = None) -> tuple[list, list]:
    """Import the model files under ``paths`` -> (CheckSpecs, errors).

    Errors are dicts ``{"file", "message"[, "line"]}``: unknown paths, files that cannot be imported or
    register no checks. A name that occurs in more than one file is qualified with the file
    (``models/a.py::loss``); a name repeated within a file gets ``[2]``, ``[3]``. The specs returned
    are copies with those names and a display path; the registry's own entries are left as they were.
    ``pattern`` (``-k``) selects after collection, see :func:`matches`; a malformed one is BadInput.
    """
    if pattern:
        check_pattern(pattern)
    files, errors = find_files(paths)
    wanted = {os.path.realpath(f) for f in files}
    specs = []
    for path in files:
        own, error = collect_file(path, wanted)
        if error:
            errors.append(error)
        specs.extend(own)
    specs = qualify(specs)
    if pattern:
        specs = [s for s in specs if matches(pattern, s.name, s.file)]
    return specs, errors


def collect_file(path: str, wanted=()) -> tuple[list, dict | None]:
    """Import one model file -> (the specs it registers itself, with display paths, None) or ([], an
    error entry). ``wanted`` holds the real paths of every model file in the run: a model that imports a
    sibling model re-registers the sibling's checks, and the sibling's own import reports them, once."""
    registered, error = import_file(path)
    if error:
        return [], error
    if not registered:
        return [], file_error(path, "registers no checks (use @gradcli.check on a function)")
    here, own = os.path.realpath(path), []
    for spec in registered:
        where = os.path.realpath(spec.file) if spec.file else here
        if where != here and where in wanted:
            continue
        own.append(spec)
    return [dataclasses.replace(s, file=display_path(s.file)) for s in own], None


def qualify(specs: list) -> list:
    """Copies of the specs with display paths and names that are unique in the run."""
    specs = [dataclasses.replace(s, file=display_path(s.file)) for s in specs]
    names = qualified_names([(s.name, s.file) for s in specs])
    return [dataclasses.replace(s, name=n) for s, n in zip(specs, names)]


def qualified_names(pairs) -> list:
    """``(name, file)`` of every check in the run, in order -> names unique in the run: ``file::name``
    where the name occurs in more than one file, ``[2]``, ``[3]`` for repeats."""
    pairs = list(pairs)
    files_of: dict = {}
    for name, file in pairs:
        files_of.setdefault(name, set()).add(file)
    out, count = [], {}
    for name, file in pairs:
        name = f"{file}::{name}" if len(files_of[name]) > 1 else name
        count[name] = count.get(name, 0) + 1
        out.append(f"{name}[{count[name]}]" if count[name] > 1 else name)
    return out


_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_OPERAND = "a name, 'not' or '('"


def check_pattern(pattern: str) -> None:
    """Raise BadInput (one line naming the column, as pytest's ``-k`` does) unless ``pattern`` is a
    whole expression: ``(``, ``mlp or``, ``mlp and (``, ``not`` and ``mlp bias`` are refused."""
    try:
        _evaluate(pattern, "", strict=True)
    except RecursionError:
        raise BadInput(f"-k {pattern!r}: nested too deeply") from None


def matches(pattern: str, name: str, file: str = "") -> bool:
    """``-k`` as in pytest: case-insensitive substrings of ``file::name``, combined with ``and``,
    ``or``, ``not`` and parentheses (``-k "mlp and not bias"``). No eval: a small parser. A malformed
    pattern (see :func:`check_pattern`, which collection applies first) is read leniently: a missing
    operand is true, and what cannot be read at all is a plain substring."""
    text = f"{file}::{name}".lower()
    try:
        return _evaluate(pattern, text, strict=False)
    except RecursionError:
        return pattern.lower() in text


def _evaluate(pattern: str, text: str, strict: bool) -> bool:
    tokens = [(m.group(), m.start() + 1) for m in _TOKEN.finditer(pattern)]
    pos = 0
    end = len(pattern) + 1

    def peek():
        return tokens[pos][0] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1][0]

    def refuse(expected: str):
        col, got = (tokens[pos][1], repr(tokens[pos][0])) if pos < len(tokens) else (end, "end of input")
        raise BadInput(f"-k {pattern!r}: at column {col}: expected {expected}; got {got}")

    # precedence: or < and < not; the pattern is a command-line word, so depth stays small
    def expr():
        value = term()
        while peek() == "or":
            take()
            value = term() or value
        return value

    def term():
        value = factor()
        while peek() == "and":
            take()
            value = factor() and value
        return value

    def factor():
        tok = peek()
        if tok == "not":
            take()
            return not factor()
        if tok == "(":
            take()
            value = expr()
            if peek() == ")":
                take()
            elif strict:
                refuse("')'")
            return value
        if tok is None or tok == ")" or (strict and tok in ("and", "or")):
            if strict:
                refuse(_OPERAND)
            return True
        return take().lower() in text

    if not tokens:
        return True
    result = expr()
    if pos < len(tokens):
        if strict:
            refuse("'and', 'or' or end of input")
        return pattern.lower() in text
    return result
