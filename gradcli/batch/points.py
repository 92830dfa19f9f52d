"""Where batch points come from and where results go: seeded sampling of domains, points files
(.npy, .npz, .csv with a header), and ``--out`` files written atomically.

Sampling is chunk-independent: every variable draws from its own generator (spawned from the seed),
and a generator's stream is the same whether it is read in one call or many, so ``--chunk`` never
changes which points are drawn.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np

from gradcli.core.assignments import split_top_level
from gradcli.core.errors import BadInput
from gradcli.core.files import PendingFile, atomic_write


@dataclass(frozen=True)
class Domain:
    low: float
    high: float


def parse_domains(values, variables, parse_constant) -> dict:
    """``("x=-1:1", "y=0:pi")`` or ``("x=-1:1, y=0:2",)`` -> {name: Domain}; every variable needs one."""
    out: dict = {}
    for raw in values or ():
        for item in split_top_level(raw):
            name, eq, rng = item.partition("=")
            name = name.strip()
            if not eq or not name or ":" not in rng:
                raise BadInput(f"--domain expects NAME=LOW:HIGH, got {item!r}")
            low_text, _, high_text = rng.partition(":")
            if name in out:
                raise BadInput(f"--domain gives {name} twice")
            try:
                low, high = parse_constant(low_text.strip()), parse_constant(high_text.strip())
            except ValueError as exc:
                raise BadInput(f"--domain {name}: {getattr(exc, 'message', exc)}") from None
            if not (math.isfinite(low) and math.isfinite(high)) or low > high:
                raise BadInput(f"--domain {name}: need finite LOW <= HIGH, got {low:g}:{high:g}")
            if not math.isfinite(float(high) - float(low)):
                raise BadInput(f"--domain {name}: HIGH - LOW overflows float64 ({low:g}:{high:g}); "
                               "split the range or narrow it")
            out[name] = Domain(float(low), float(high))
    extra = [k for k in out if k not in variables]
    if extra:
        have = ", ".join(variables) or "none"
        raise BadInput(f"--domain {extra[0]}: not a variable of the expression (its variables: {have})")
    missing = [v for v in variables if v not in out]
    if missing:
        raise BadInput(f"no domain for {', '.join(missing)}: pass --domain {missing[0]}=LOW:HIGH"
                       + (" for each" if len(missing) > 1 else ""))
    return out


class Sampler:
    """Uniform points in a box, drawn chunk by chunk; identical for any chunk size."""

    def __init__(self, variables, domains: dict, n: int, seed: int = 0):
        self.variables = tuple(variables)
        self.domains = domains
        self.n = int(n)
        children = np.random.SeedSequence(int(seed)).spawn(max(len(self.variables), 1))
        self._rngs = [np.random.default_rng(s) for s in children]
        self._next = 0

    def chunk(self, start: int, stop: int) -> dict:
        if start != self._next:
            raise ValueError("a Sampler is read in order")
        self._next = stop
        out = {}
        for v, rng in zip(self.variables, self._rngs):
            d = self.domains[v]
            out[v] = rng.uniform(d.low, d.high, stop - start)
        return out


class ArrayPoints:
    """Points already in memory (a dict of equal-length 1-D arrays)."""

    def __init__(self, variables, arrays: dict):
        self.variables = tuple(variables)
        self.arrays = arrays
        self.n = len(next(iter(arrays.values()))) if arrays else 0

    def chunk(self, start: int, stop: int) -> dict:
        return {v: self.arrays[v][start:stop] for v in self.variables}


def check_arrays(variables, arrays: dict, source: str) -> dict:
    """Validate ``{name: 1-D array}`` against the variables: present, same length, finite, non-empty."""
    missing = [v for v in variables if v not in arrays]
    if missing:
        have = ", ".join(arrays) or "none"
        raise BadInput(f"{source}: no column for {', '.join(missing)} (it has: {have})")
    out, n = {}, None
    for v in variables:
        try:
            a = np.asarray(arrays[v], dtype=np.float64)
        except (TypeError, ValueError):
            raise BadInput(f"{source}: the values of {v} are not numbers") from None
        if a.ndim == 2 and 1 in a.shape:  # a column or row vector
            a = a.reshape(-1)
        if a.ndim != 1:
            raise BadInput(f"{source}: {v} must be a 1-D array of points, got shape {a.shape}")
        if n is not None and a.size != n:
            raise BadInput(f"{source}: {v} has {a.size} points but {variables[0]} has {n}")
        n = a.size
        bad = np.flatnonzero(~np.isfinite(a))
        if bad.size:
            raise BadInput(f"{source}: {v} is not finite at row {int(bad[0])} ({a[bad[0]]})")
        out[v] = a
    if n == 0:
        raise BadInput(f"{source}: no points")
    return out


def read_points(path: str, variables) -> dict:
    """A points file -> {variable: 1-D float64 array}. Raises BadInput with the file's name."""
    variables = tuple(variables)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".npy", ".npz", ".csv"):
        raise BadInput(f"--points {path}: unknown file type {ext or '(none)'!r}; use .npy, .npz or .csv")
    if not os.path.isfile(path):
        raise BadInput(f"--points {path}: no such file")
    try:
        if ext == ".csv":
            arrays = _read_csv(path, variables)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if all(v in z.files for v in variables):
                    arrays = {v: z[v] for v in variables}
                elif "points" in z.files and "variables" in z.files:  # what --out writes
                    names = [str(s) for s in z["variables"]]
                    pts = z["points"]
                    if pts.ndim != 2 or pts.shape[1] != len(names):
                        raise BadInput(f"--points {path}: 'points' must be (N, {len(names)})")
                    arrays = {name: pts[:, k] for k, name in enumerate(names)}
                else:
                    arrays = {k: z[k] for k in z.files}
        else:
            a = np.load(path, allow_pickle=False)
            arrays = _from_npy(a, variables, path)
    except BadInput:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:  # corrupt files
        raise BadInput(f"--points {path}: cannot read it ({_one_line(exc)})") from None
    return check_arrays(variables, arrays, f"--points {path}")


def _one_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _from_npy(a: np.ndarray, variables, path) -> dict:
    if a.dtype.names:  # structured: one field per variable
        return {name: a[name] for name in a.dtype.names}
    if a.ndim == 1 and len(variables) == 1:
        return {variables[0]: a}
    if a.ndim != 2 or a.shape[1] != len(variables):
        raise BadInput(f"--points {path}: expected an (N, {len(variables)}) array with columns "
                       f"{', '.join(variables)}, got shape {a.shape}")
    return {v: a[:, k] for k, v in enumerate(variables)}


def _read_csv(path: str, variables) -> dict:
    """The columns named like the variables (other columns are not read: labels, ids, notes)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:  # -sig: a spreadsheet's byte-order mark
        header = fh.readline()
        if not header.strip():
            raise BadInput(f"--points {path}: empty file (expected a header of variable names)")
        names = [h.strip().strip('"') for h in header.split(",")]
        if any(not n for n in names) or len(set(names)) != len(names):
            raise BadInput(f"--points {path}: the header must name every column once, got {header.strip()!r}")
        if not any(n.isidentifier() for n in names):
            raise BadInput(f"--points {path}: the first line must be a header of variable names, "
                           f"got {header.strip()!r}")
        used = [k for k, n in enumerate(names) if n in variables] if variables else list(range(len(names)))
        if not used:
            raise BadInput(f"--points {path}: no column for {', '.join(variables)} (it has: {', '.join(names)})")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "input contained no data": reported below
                data = np.loadtxt(fh, delimiter=",", dtype=np.float64, ndmin=2, usecols=used)
        except ValueError as exc:
            raise BadInput(f"--points {path}: malformed data ({_one_line(exc)})") from None
    if data.size == 0:
        raise BadInput(f"--points {path}: no points")
    return {names[k]: data[:, j] for j, k in enumerate(used)}


# --- --out: written atomically -------------------------------------------------------------------------

def out_columns(variables, n_outputs: int) -> tuple[list, list]:
    """Names of the value and gradient columns: f, df/dx ... (f1, f2, df1/dx ... when vector-valued)."""
    fs = ["f"] if n_outputs == 1 else [f"f{i + 1}" for i in range(n_outputs)]
    grads = [f"d{f}/d{v}" for f in fs for v in variables]
    return fs, grads


def _reserve(path: str) -> None:
    """Allocate a memory-mapped file's blocks now: a full disk is then an error here, where writing
    into a sparse map later would kill the process with SIGBUS."""
    if hasattr(os, "posix_fallocate"):
        with open(path, "r+b") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size:
                os.posix_fallocate(fh.fileno(), 0, size)


class OutWriter:
    """Collects points, values and the Jacobian chunk by chunk and publishes the file at ``close()``.

    Everything is written to a temporary file in the target's own directory and moved over the target
    with ``os.replace``, so a reader sees the old file or the complete new one, never half of one; on
    failure (``abort``) the temporary files are removed and the old file is untouched.
    """

    def __init__(self, path: str, variables, n_outputs: int, n_points: int):
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".npz", ".csv"):
            raise BadInput(f"--out {path}: unknown file type {ext or '(none)'!r}; use .npz or .csv")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise BadInput(f"--out {path}: no such directory {directory}")
        self.path, self.ext = path, ext
        self.variables, self.m, self.n = tuple(variables), n_outputs, n_points
        self._done = 0
        base = os.path.basename(path)
        try:
            if ext == ".csv":
                self._csv = PendingFile(path, "w", newline="")
                fs, grads = out_columns(self.variables, n_outputs)
                self._csv.file.write(",".join([*self.variables, *fs, *grads]) + "\n")
            else:
                # columns too large for memory stay on disk (memory maps) until they are zipped
                self._dir = tempfile.mkdtemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
                def mm(name, shape):
                    where = os.path.join(self._dir, name + ".npy")
                    arr = np.lib.format.open_memmap(where, mode="w+", dtype=np.float64, shape=shape)
                    _reserve(where)
                    return arr
                self._points = mm("points", (n_points, len(self.variables)))
                self._values = mm("value", (n_points, n_outputs))
                self._jac = mm("jacobian", (n_points, n_outputs, len(self.variables)))
        except OSError as exc:
            self.abort()
            raise BadInput(f"--out {path}: cannot write there ({_one_line(exc)})") from None

    def write(self, points: dict, values: np.ndarray, jac: np.ndarray) -> None:
        """``values`` (m, k) and ``jac`` (m, n, k) for the next k points."""
        try:
            self._write(points, values, jac)
        except OSError as exc:  # the disk filled up: the target is untouched, the temporary files go
            self.abort()
            raise BadInput(f"--out {self.path}: cannot write it ({_one_line(exc)})") from None

    def _write(self, points: dict, values: np.ndarray, jac: np.ndarray) -> None:
        k = values.shape[1]
        s = slice(self._done, self._done + k)
        P = np.stack([np.asarray(points[v], dtype=np.float64) for v in self.variables], axis=1) \
            if self.variables else np.zeros((k, 0))
        V = np.asarray(values, dtype=np.float64).T
        J = np.asarray(jac, dtype=np.float64).transpose(2, 0, 1)
        if self.ext == ".csv":
            rows = np.concatenate([P, V, J.reshape(k, -1)], axis=1)
            np.savetxt(self._csv.file, rows, delimiter=",", fmt="%.17g")
        else:
            self._points[s], self._values[s], self._jac[s] = P, V, J
        self._done += k

    def close(self) -> None:
        if self.ext == ".csv":
            self._csv.publish()
            return
        try:
            scalar = self.m == 1
            arrays = {"points": self._points, "variables": np.array(self.variables, dtype=str),
                      "value": self._values[:, 0] if scalar else self._values}
            for k, v in enumerate(self.variables):
                arrays[f"grad_{v}"] = self._jac[:, 0, k] if scalar else self._jac[:, :, k]
            with atomic_write(self.path, "wb") as fh:
                np.savez(fh, **arrays)
        finally:
            self._cleanup_dir()

    def _cleanup_dir(self):
        d = getattr(self, "_dir", None)
        if d is not None:
            self._points = self._values = self._jac = None  # release the maps before deleting
            shutil.rmtree(d, ignore_errors=True)
            self._dir = None

    def abort(self) -> None:
        csv = getattr(self, "_csv", None)
        if csv is not None:
            csv.discard()
        self._cleanup_dir()
