"""``gradcli grad --batch N`` / ``--points FILE``: the batch half of ``gradcli grad``, in its own module so
that grad at a point never loads the batch engines."""
from __future__ import annotations

import sys

import click

from gradcli.batch import api as batch
from gradcli.engines.device import resolve_target
from gradcli.verdict.point import parse_methods
from gradcli.core import options as option_values
from gradcli.core.errors import BadInput
from gradcli.render.batch import render_batch
from gradcli.render.json import dumps
from gradcli.cli.common import console, fail, progress_console


def run_batch_command(expr, at, methods, rtol, atol, timeout, as_json, batch_n, domains, points_file, seed, device,
                      engine, dtype, chunk, out, dask=None):
    """``--batch N`` / ``--points FILE``: every method over many points, statistics and worst points."""
    chunk = batch.DEFAULT_CHUNK if chunk is None else chunk
    try:
        if at:
            raise BadInput("--at gives one point; batch mode takes --domain (with --batch) or --points")
        if batch_n is not None and points_file is not None:
            raise BadInput("--batch and --points exclude each other: give one")
        if points_file is not None and seed is not None:
            raise BadInput("--seed only goes with --batch N (the points file gives the points)")
        option_values.seed(seed, "--seed")
        dt = batch.check_options(rtol, atol, timeout, chunk, dtype or "float64")
        selected = parse_methods(methods) if methods else None
        dev, engine, note = resolve_target(device, engine)
        graph, source, info, warnings = batch.prepare_batch(expr, points_file=points_file, n=batch_n,
                                                            domain=domains or None, seed=seed or 0)
    except ValueError as exc:  # BadInput is a ValueError too
        fail(exc if isinstance(exc, BadInput) else BadInput(str(exc)), as_json)
    if note:
        click.echo(f"note: {note}", err=True)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    show = not as_json and sys.stderr.isatty() and source.n >= PROGRESS_POINTS
    try:
        with _progress(show, source.n) as progress:
            report = batch.run_prepared(graph, source, info, warnings, expr=expr, methods=selected, rtol=rtol,
                                        atol=atol, dtype=dt, device=dev, chunk=chunk, out=out, timeout=timeout,
                                        progress=progress, engine=engine, dask=dask)
    except BadInput as exc:
        fail(exc, as_json)
    if as_json:
        click.echo(dumps(report.to_dict()))
    else:
        console().print(render_batch(report))
    sys.exit(report.exit_code)


#: A progress bar (stderr, terminals only, never with --json) from this many points on.
PROGRESS_POINTS = 1_000_000


class _progress:
    """A rich progress bar on stderr, or nothing; yields the callback ``progress(done, total)``. It shows
    the points done, the rate (points/s) and the time left."""

    def __init__(self, show: bool, total: int):
        self.show, self.total = show, total
        self.bar = None

    def __enter__(self):
        if not self.show:
            return None
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task):
                return Text(rate_text(task.finished_speed or task.speed))

        self.bar = Progress(TextColumn("checking"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} points"),
                            Rate(), TextColumn("ETA"), TimeRemainingColumn(), console=progress_console(),
                            transient=True)
        self.bar.start()
        task = self.bar.add_task("batch", total=self.total)
        return lambda done, total: self.bar.update(task, completed=done)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def rate_text(speed) -> str:
    """The progress bar's rate: ``1,234,567 points/s``; blank until there is one."""
    return f"{speed:,.0f} points/s" if speed else ""
