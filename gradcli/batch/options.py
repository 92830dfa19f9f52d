"""The options of a batch run, checked once where they come in (the command line, ``grad_batch``) and
carried from there to every chunk as one frozen :class:`BatchOptions`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.engines.device import resolve_target
from gradcli.methods.symbolic import DEFAULT_TIMEOUT
from gradcli.verdict.point import PointOptions, parse_methods
from gradcli.verdict.report import METHOD_ORDER

DTYPES = {"float64": np.float64, "float32": np.float32}
#: The worst points a report keeps per method.
WORST = 5


@dataclass(frozen=True)
class BatchOptions:
    """How a batch is compared and where it runs.

    ``methods``: the names selected, in the canonical order; ``rtol``, ``atol``: the user's tolerance (None:
    each method's own); ``dtype``: ``np.float64`` or ``np.float32``; ``device``: ``cpu`` or ``cuda``;
    ``engine``: of the compiled program (``auto`` until the batch chooses one); ``chunk``: points per chunk
    (None: chosen from the device, :func:`gradcli.batch.arrays.batch_chunk`); ``timeout``: seconds for
    sympy (None: no limit); ``worst``: the worst points kept per method; ``out``: the file for values and
    gradients; ``dask``: a scheduler's address or a ``distributed.Client`` (None: here)."""

    methods: tuple = tuple(METHOD_ORDER)
    rtol: float | None = None
    atol: float | None = None
    dtype: type = np.float64
    device: str = "cpu"
    engine: str = "auto"
    chunk: int | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    worst: int = WORST
    out: str | None = None
    dask: object = None

    @classmethod
    def validate(cls, *, methods=None, rtol=None, atol=None, dtype="float64", device=None, engine=None,
                 chunk=None, timeout=DEFAULT_TIMEOUT, worst=WORST, out=None, dask=None) -> tuple[BatchOptions, str]:
        """Every option checked once, for the command line and the Python API alike: :class:`BadInput`
        with one line that names the option. -> (options, a note for stderr about the device, or "")."""
        # the point commands' rules: rtol=inf and --rtol inf read the same everywhere
        point = PointOptions.validate(None, rtol, atol, timeout)
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk <= 0):
            raise BadInput(f"--chunk needs a positive number of points, got {chunk!r}")
        try:
            name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
        except TypeError:
            raise BadInput(f"unknown dtype {dtype!r}; choose float64 or float32") from None
        if name not in DTYPES:
            raise BadInput(f"unknown dtype {name!r}; choose float64 or float32")
        if isinstance(worst, bool) or not isinstance(worst, (int, np.integer)) or worst < 1:
            raise BadInput(f"worst must be a positive number of points, got {worst!r}")
        selected = tuple(parse_methods(methods))
        dev, eng, note = resolve_target(device, engine)
        return cls(selected, point.rtol, point.atol, DTYPES[name], dev, eng, None if chunk is None else int(chunk),
                   point.timeout or None, int(worst), out, dask), note
