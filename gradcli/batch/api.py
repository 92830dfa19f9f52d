"""``gradcli.grad_batch``: the batch comparison from Python, and the input checks the CLI shares."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.parser import parse_expression
from gradcli.core import options as option_values
from gradcli.core.errors import BadInput, brief
from gradcli.core.graph import Graph
from gradcli.methods.symbolic import DEFAULT_TIMEOUT
from gradcli.core.parse_hints import suggest_call, suspicious_variables
from gradcli.core.parser import parse_constant
from gradcli.batch import distributed
from gradcli.batch.compare import run_batch
from gradcli.batch.options import WORST, BatchOptions
from gradcli.batch.points import ArrayPoints, OutWriter, Sampler, check_arrays, parse_domains, read_points
from gradcli.batch.report import BatchReport

#: The most points a batch takes: counts and indices stay exact in float64 statistics up to here, and
#: beyond it numpy's index arithmetic overflows.
MAX_POINTS = 2 ** 53


@dataclass(frozen=True)
class PreparedBatch:
    """What a batch compares: the expression as given, its graph, the points (``source``: ``.n`` of them,
    ``.chunk(a, b)``), how they were given (``info``, for the report) and the warnings about the input."""

    expression: str
    graph: Graph
    source: object
    info: dict
    warnings: tuple


def _domain_texts(domain) -> list:
    """A domain as the CLI's texts: {"x": (-1, 1)} -> ["x=-1:1"]; strings pass through."""
    if domain is None:
        return []
    if isinstance(domain, str):
        return [domain]
    if isinstance(domain, dict):
        texts = []
        for name, rng in domain.items():
            try:
                lo, hi = rng
                texts.append(f"{name}={float(lo)!r}:{float(hi)!r}")
            except (TypeError, ValueError):
                raise BadInput(f"domain {name}: expected (low, high), got {rng!r}") from None
        return texts
    if not isinstance(domain, (list, tuple)):
        raise BadInput(f"domain must be a dict of (low, high) by name, or texts such as \"x=-1:1\", "
                       f"got {brief(domain)}")
    return [str(d) for d in domain]


def prepare_batch(expr: str, *, points=None, points_file: str | None = None, n=None, domain=None,
                  seed: int = 0) -> PreparedBatch:
    """Parse ``expr`` and build its point source."""
    graph = parse_expression(expr)
    given = sum(x is not None for x in (points, points_file, n))
    if given != 1:
        raise BadInput("give exactly one of --batch N (with --domain) or --points FILE"
                       if given == 0 else "--batch and --points exclude each other: give one")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise BadInput(f"--batch needs a positive number of points, got {n!r}")
        if n > MAX_POINTS:
            raise BadInput(f"--batch: at most {MAX_POINTS} (2**53) points, got {n}")
        domains = parse_domains(_domain_texts(domain), graph.variables, parse_constant)
        source = Sampler(graph.variables, domains, int(n), seed)
        info = {"domain": {k: [d.low, d.high] for k, d in domains.items()}, "seed": int(seed)}
    else:
        if domain:
            raise BadInput("--domain only goes with --batch N (the points file gives the points)")
        if points_file is not None:
            arrays = read_points(points_file, graph.variables)
            info = {"points_file": str(points_file)}
        else:
            if not isinstance(points, dict):
                raise BadInput("points must be a dict {variable: array}")
            extra = [k for k in points if k not in graph.variables]
            if extra:
                raise BadInput(f"{extra[0]} is not a variable of the expression "
                               f"(its variables: {', '.join(graph.variables) or 'none'})")
            arrays = check_arrays(graph.variables, points, "points")
            info = {}
        if not graph.variables:
            raise BadInput("the expression has no variables: use --batch N to repeat it")
        source = ArrayPoints(graph.variables, arrays)
    lone = suspicious_variables(graph) if len(graph.variables) == 1 else []
    warnings = [f"{v} is a variable; did you mean {suggest_call(v)}?" for v in lone]
    return PreparedBatch(expr, graph, source, info, tuple(warnings))


def grad_batch(expr: str, points: dict | None = None, *, n: int | None = None, domain=None, seed: int = 0,
               methods=None, rtol=None, atol=None, dtype="float64", device: str | None = None,
               chunk: int | None = None, out: str | None = None, timeout: float = DEFAULT_TIMEOUT,
               worst: int = WORST, progress=None, engine: str | None = None, dask=None) -> BatchReport:
    """Every method over many points: ``points={"x": array, ...}``, or ``n`` uniform samples of
    ``domain={"x": (-1, 1), ...}`` (or ``"x=-1:1, y=0:2"``) seeded by ``seed``.

    >>> r = grad_batch("x**2*sin(y)", n=1000, domain={"x": (-1, 1), "y": (0, 2)})
    >>> r.status, r.methods["forward"].agree_fraction
    ('agree', 1.0)

    ``r.to_dict()`` is exactly the ``--json`` document; ``out`` writes values and gradients (.npz or
    .csv, atomically); ``engine`` (``numpy``, ``numba`` or ``cuda``) overrides the rule that picks the
    compiled program's engine from the batch alone (docs/batch-usage.md); ``chunk`` (points per chunk)
    the one that picks it from the device (docs/batch.md); ``dask`` (a scheduler's address,
    ``"tcp://host:8786"``, or a ``distributed.Client``) runs the chunks on that cluster, with the same
    statistics (docs/batch.md). Raises :class:`gradcli.BadInput` on bad input.
    """
    options, _ = BatchOptions.validate(methods=methods, rtol=rtol, atol=atol, dtype=dtype, device=device,
                                       engine=engine, chunk=chunk, timeout=timeout, worst=worst, out=out, dask=dask)
    option_values.seed(seed, "seed", optional=False)
    batch = prepare_batch(expr, points=points, n=n, domain=domain, seed=seed)
    return run_prepared(batch, options, progress)


def run_prepared(batch: PreparedBatch, options: BatchOptions, progress=None) -> BatchReport:
    """Run a prepared batch; ``options.out`` is published only when the whole run succeeded. A Dask
    client made here from an address (``options.dask``) is closed here."""
    writer = client = None
    owned = False
    out = options.out
    try:
        if options.dask is not None:
            client, owned = distributed.connect(options.dask)
        if out is not None:
            writer = OutWriter(out, batch.graph.variables, len(batch.graph.outputs), batch.source.n,
                               inputs=[batch.info["points_file"]] if "points_file" in batch.info else ())
        report = run_batch(batch, options, out=writer, progress=progress, client=client)
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                raise BadInput(f"--out {out}: cannot write it ({exc.strerror or exc})") from None
    except BaseException as exc:
        if writer is not None:
            writer.abort()
        if isinstance(exc, MemoryError):
            size = f"chunks of {options.chunk} points" if options.chunk else "the chunks chosen from its memory"
            raise BadInput(f"not enough memory for {size}: give a smaller --chunk") from None
        raise
    finally:
        if owned:
            distributed.close(client)
    return report
