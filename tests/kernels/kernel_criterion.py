"""The criterion a low-precision kernel is judged by in these tests: for the output and each gradient,
the kernel's largest error against the float64 truth is at most FACTOR times the largest error of the
same reference run in the kernel's dtype, plus the dtype's subnormal spacing (so that an exact
reference does not make every rounding an error)."""
import numpy as np

FACTOR = 2.0


def judge(got, same, truth, spacing):
    """(passes, rows of (kernel error, reference error, bound)); arguments are lists of arrays, in order."""
    rows = []
    for g, s, t in zip(got, same, truth, strict=True):
        t = np.asarray(t, dtype=np.float64)
        ref_err = float(np.abs(np.asarray(s, dtype=np.float64) - t).max())
        rows.append((float(np.abs(np.asarray(g, dtype=np.float64) - t).max()), ref_err, FACTOR * ref_err + spacing))
    return all(k <= bound for k, _, bound in rows), rows
