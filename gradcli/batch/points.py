"""Where batch points come from and where results go: seeded sampling of domains, points files
(.npy, .npz, .csv with a header), and ``--out`` files written atomically.

Sampling is chunk-independent: every variable draws from its own generator (spawned from the seed),
and a generator's stream is the same whether it is read in one call or many, so ``--chunk`` never
changes which points are drawn. A chunk is drawn by jumping straight to its place in those streams, so
chunks can be drawn in any order, in any process (a Dask worker), without the chunks before them.
"""
from __future__ import annotations

import math
import os
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np

from gradcli.core.assignments import split_top_level
from gradcli.core.errors import BadInput
from gradcli.core.files import PendingFile, atomic_write, output_target, pending_directory, remove_directory


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
    """Uniform points in a box, drawn chunk by chunk; identical for any chunk size, and any chunk can
    be drawn first (points ``start:stop`` are the same numbers one sequential draw of ``stop`` gives)."""

    def __init__(self, variables, domains: dict, n: int, seed: int = 0):
        self.variables = tuple(variables)
        self.domains = domains
        self.n = int(n)
        self._seeds = np.random.SeedSequence(int(seed)).spawn(max(len(self.variables), 1))

    def chunk(self, start: int, stop: int) -> dict:
        if not 0 <= start <= stop:
            raise ValueError(f"a chunk is 0 <= start <= stop, got {start}:{stop}")
        out = {}
        for v, seed in zip(self.variables, self._seeds):
            d = self.domains[v]
            # numpy's uniform doubles take one 64-bit step of PCG64 each: point k is step k of the stream
            bits = np.random.PCG64(seed)
            bits.advance(start)
            out[v] = np.random.Generator(bits).uniform(d.low, d.high, stop - start)
        return out


class ArrayPoints:
    """Points already in memory (a dict of equal-length 1-D arrays)."""

    def __init__(self, variables, arrays: dict):
        self.variables = tuple(variables)
        self.arrays = arrays
        self.n = len(next(iter(arrays.values()))) if arrays else 0

    def chunk(self, start: int, stop: int) -> dict:
        return {v: self.arrays[v][start:stop] for v in self.variables}


#: dtype kinds that are not real numbers: bool, complex, datetime, timedelta, bytes, str, void (the
#: imaginary part, the epoch or the truth value would be read as a coordinate without a word)
NOT_REAL = {"b": "booleans", "c": "complex numbers", "M": "dates", "m": "time spans", "S": "bytes",
            "U": "text", "V": "raw bytes"}


def check_arrays(variables, arrays: dict, source: str) -> dict:
    """Validate ``{name: 1-D array}`` against the variables: present, real numbers, same length, finite,
    non-empty."""
    missing = [v for v in variables if v not in arrays]
    if missing:
        have = ", ".join(arrays) or "none"
        raise BadInput(f"{source}: no column for {', '.join(missing)} (it has: {have})")
    out, n = {}, None
    for v in variables:
        try:
            raw = np.asarray(arrays[v])
            kind = raw.dtype.kind
            # a copy: never a view of the caller's array or of a file that may change during the run
            a = None if kind in NOT_REAL else np.array(raw, dtype=np.float64)
        except (TypeError, ValueError):
            raise BadInput(f"{source}: the values of {v} are not numbers") from None
        if a is None:
            raise BadInput(f"{source}: the values of {v} are {NOT_REAL[kind]} ({raw.dtype}), not real numbers")
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
            arrays = _read_npz(path, variables)
        else:
            with open(path, "rb") as fh:
                arrays = _from_npy(_read_npy(fh, os.fstat(fh.fileno()).st_size, path, "the array"),
                                   variables, path)
        return check_arrays(variables, arrays, f"--points {path}")
    except BadInput:
        raise
    except MemoryError:  # a file larger than this machine's memory, or a zip member that lies about its size
        raise BadInput(f"--points {path}: too large to load into memory") from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:  # corrupt files
        raise BadInput(f"--points {path}: cannot read it ({_one_line(exc)})") from None


def _read_npy(fh, size: int, path: str, what: str) -> np.ndarray:
    """One .npy array from ``fh`` (``size`` bytes long). The header is checked against the bytes that
    follow it before anything is allocated: a 200-byte file may declare a shape of 10**11 rows."""
    version = np.lib.format.read_magic(fh)
    header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = header(fh)
    need, have = math.prod(shape) * dtype.itemsize, size - fh.tell()
    if need > have:
        raise BadInput(f"--points {path}: {what} declares shape {shape} ({need:,} bytes) but the file holds "
                       f"{max(have, 0):,} bytes of data")
    fh.seek(0)
    return np.lib.format.read_array(fh, allow_pickle=False)


def _read_npz(path: str, variables) -> dict:
    """The arrays of an .npz points file: the layout ``--out`` writes (docs/contract.md), else one array
    per variable, named like it."""
    with zipfile.ZipFile(path) as zf:
        members = {name[:-4]: zf.getinfo(name) for name in zf.namelist() if name.endswith(".npy")}

        def load(key):
            with zf.open(members[key]) as fh:
                return _read_npy(fh, members[key].file_size, path, repr(key))

        if OUT_FORMAT_KEY in members:
            version = load(OUT_FORMAT_KEY)
            if version.shape != () or version.dtype.kind not in "iu" or not 1 <= int(version) <= OUT_FORMAT:
                raise BadInput(f"--points {path}: written by a newer gradcli ({OUT_FORMAT_KEY} = {version!r}); "
                               f"this one reads up to format {OUT_FORMAT}")
            return _out_arrays(load, path)
        if _older_out_file(members, load):
            return _out_arrays(load, path)
        missing = [v for v in variables if v not in members]
        if missing:
            raise BadInput(f"--points {path}: no array for {', '.join(missing)} "
                           f"(it has: {', '.join(sorted(members)) or 'none'})")
        return {v: load(v) for v in variables}


def _older_out_file(members: dict, load) -> bool:
    """A file ``--out`` wrote before it marked its files: exactly its keys (points, variables, value and
    grad_NAME for each variable), whatever the variables are called."""
    if not {"points", "variables", "value"} <= set(members):
        return False
    try:
        names = _out_names(load("variables"), "")
    except BadInput:
        return False
    return set(members) == {"points", "variables", "value", *(f"grad_{v}" for v in names)}


def _out_names(names: np.ndarray, path: str) -> list:
    if names.ndim != 1 or names.dtype.kind not in "US":
        raise BadInput(f"--points {path}: 'variables' must be a 1-D array of variable names, "
                       f"got {names.dtype} of shape {names.shape}")
    out = [str(s) if names.dtype.kind == "U" else s.decode("ascii", "replace") for s in names]
    if len(set(out)) != len(out) or not all(out):
        raise BadInput(f"--points {path}: 'variables' must name each column once, got {out}")
    return out


def _out_arrays(load, path: str) -> dict:
    """The points of an ``--out`` file: column k of 'points' is the variable 'variables'[k]."""
    names = _out_names(load("variables"), path)
    pts = load("points")
    if pts.ndim != 2 or pts.shape[1] != len(names):
        raise BadInput(f"--points {path}: 'points' must be (N, {len(names)}), got shape {pts.shape}")
    return {name: pts[:, k] for k, name in enumerate(names)}


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

#: An .npz that ``--out`` writes holds this key (its format version), and no variable can be called so
#: (identifiers never start with __): a points file keyed by variable names is never mistaken for one,
#: and one is never read by name, whatever its variables are called (``value``, ``points``...).
OUT_FORMAT_KEY = "__gradcli_out__"
#: 1: the files written before the key existed (the same layout without it); 2: with the key
OUT_FORMAT = 2

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

    def __init__(self, path: str, variables, n_outputs: int, n_points: int, inputs=()):
        if not path:
            raise BadInput("--out needs a file name (.npz or .csv)")
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".npz", ".csv"):
            raise BadInput(f"--out {path}: unknown file type {ext or '(none)'!r}; use .npz or .csv")
        # the user's name in the report and messages; the file replaced is a symlink's target
        self.path, self.ext = path, ext
        self._target = target = output_target(path, "--out", inputs, "the points file")
        self.variables, self.m, self.n = tuple(variables), n_outputs, n_points
        self._done = 0
        self._csv = self._dir = None
        try:
            if ext == ".csv":
                self._csv = PendingFile(target, "w", newline="")
                fs, grads = out_columns(self.variables, n_outputs)
                self._csv.file.write(",".join([*self.variables, *fs, *grads]) + "\n")
            else:
                # columns too large for memory stay on disk (memory maps) until they are zipped
                self._dir = pending_directory(target)
                def mm(name, shape):
                    where = os.path.join(self._dir, name + ".npy")
                    arr = np.lib.format.open_memmap(where, mode="w+", dtype=np.float64, shape=shape)
                    _reserve(where)
                    return arr
                self._points = mm("points", (n_points, len(self.variables)))
                self._values = mm("value", (n_points, n_outputs))
                self._jac = mm("jacobian", (n_points, n_outputs, len(self.variables)))
        except BaseException as exc:
            self.abort()
            # ValueError, OverflowError: more points than a file can hold
            if isinstance(exc, (OSError, ValueError, OverflowError)):
                raise BadInput(f"--out {path}: cannot write there ({_one_line(exc)})") from None
            raise

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
            arrays = {OUT_FORMAT_KEY: np.array(OUT_FORMAT), "points": self._points,
                      "variables": np.array(self.variables, dtype=str),
                      "value": self._values[:, 0] if scalar else self._values}
            for k, v in enumerate(self.variables):
                arrays[f"grad_{v}"] = self._jac[:, 0, k] if scalar else self._jac[:, :, k]
            with atomic_write(self._target, "wb") as fh:
                np.savez(fh, **arrays)
        finally:
            self._cleanup_dir()

    def _cleanup_dir(self):
        if self._dir is not None:
            self._points = self._values = self._jac = None  # release the maps before deleting
            remove_directory(self._dir)
            self._dir = None

    def abort(self) -> None:
        if self._csv is not None:
            self._csv.discard()
        self._cleanup_dir()
