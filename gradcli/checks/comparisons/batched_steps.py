"""The finite differences' steps evaluated many at a time, where the function offers ``batch(points)`` (a
torch Function's forward under vmap: gradcli.checks.targets.torch_batch), for gradcli.checks.comparisons.numeric: the same
steps, read by the same rules, in a few calls instead of one each."""
from __future__ import annotations

import warnings

import numpy as np

EPS = np.finfo(np.float64).eps
BATCH_ULPS = 64  # how far, in eps of the largest |f|, a batched evaluation may be from a single call's
#: the moved input elements gathered for one batch at most (each point moves a copy of an input)
GROUP_ELEMENTS = 2 ** 22


def at_many(fn, moved: list, f0: np.ndarray) -> list:
    """``fn.at`` (a gradcli.checks.comparisons.numeric.Function) of each of ``moved``, in one batched evaluation where
    the call offers one. The batch is trusted once its first evaluation gives the point itself and the first
    moved point as single calls do, to f's rounding (vectorised kernels over a batch may round the last bit
    otherwise, which the error estimates allow for as they allow for f's own rounding); else, or where it
    cannot run (data-dependent branches, randomness), every point is called on its own from then on."""
    if fn.batch is None or len(moved) < 2:
        return [fn.at(m) for m in moved]
    first = None if fn.trusted else fn.at(moved[0])
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = fn.batch([{**fn.base, **m} for m in ([] if fn.trusted else [{}]) + moved])
    except Exception:  # noqa: BLE001 - the batch only saves time: single calls decide
        outs = None
    if outs is not None and not fn.trusted:
        fn.trusted = _same(outs[0], f0) and first is not None and _same(outs[1], first)
        outs = outs[1:]
    if outs is None or not fn.trusted:
        fn.batch = None
        return ([] if first is None else [first]) + [fn.at(m) for m in moved[0 if first is None else 1:]]
    fn.calls += len(moved)
    return [np.asarray(o, dtype=np.float64).ravel() for o in outs]


def _same(out, ref) -> bool:
    """``out`` is ``ref`` to rounding: the same non-finite entries, the rest within BATCH_ULPS eps of the
    largest |ref| (a forward that computes something else under the batch differs by far more)."""
    out = np.asarray(out, dtype=np.float64).ravel()
    live = np.isfinite(ref)
    if out.shape != ref.shape or not np.array_equal(out[~live], ref[~live], equal_nan=True):
        return False
    scale = np.max(np.abs(ref[live]), initial=0.0)
    return bool(np.all(np.abs(out[live] - ref[live]) <= BATCH_ULPS * EPS * scale))


def prefetch(fn, wanted: list) -> None:
    """Evaluates the steps ``(line, t)`` (a numeric ``_Line`` and a step) not yet cached, in batches where
    ``fn`` offers them: the lines then read them as if they had called f themselves (the same steps, in the
    same order). Points are gathered GROUP_ELEMENTS moved elements at a time, so that a large input's
    copies (one per point) never pile up."""
    if fn.batch is None:
        return
    group, size = [], 0
    for line, t in dict.fromkeys(wanted):
        if t in line.cache:
            continue
        moved, actual = line.move(t)
        group.append((line, t, moved, actual))
        size += sum(int(np.size(v)) for v in moved.values())
        if size >= GROUP_ELEMENTS:
            _fetch(fn, group)
            group, size = [], 0
            if fn.batch is None:  # refused: the steps are called when read, as without batches
                return
    if group:
        _fetch(fn, group)


def _fetch(fn, group: list) -> None:
    outs = at_many(fn, [moved for _, _, moved, _ in group], group[0][0].f0)
    for (line, t, _, actual), out in zip(group, outs):
        line.keep(t, out, actual)
