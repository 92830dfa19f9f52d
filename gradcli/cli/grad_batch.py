"""``gradcli grad --batch N`` / ``--points FILE``: the batch half of ``gradcli grad``, in its own module so
that grad at a point never loads the batch engines."""
from __future__ import annotations

import sys

import click

from gradcli.batch import api as batch
from gradcli.batch.options import BatchOptions
from gradcli.core import options as option_values
from gradcli.core.errors import BadInput
from gradcli.render.batch import render_batch
from gradcli.render.json import dumps
from gradcli.cli.common import console, fail, progress_console


def run_batch_command(params: dict) -> None:
    """``--batch N`` / ``--points FILE``: every method over many points, statistics and worst points.
    ``params``: the grad command's values by name, as click parsed them."""
    as_json = params["as_json"]
    try:
        if params["at"]:
            raise BadInput("--at gives one point; batch mode takes --domain (with --batch) or --points")
        if params["batch_n"] is not None and params["points_file"] is not None:
            raise BadInput("--batch and --points exclude each other: give one")
        if params["points_file"] is not None and params["seed"] is not None:
            raise BadInput("--seed only goes with --batch N (the points file gives the points)")
        option_values.seed(params["seed"], "--seed")
        options, note = BatchOptions.validate(
            methods=params["methods"] or None, rtol=params["rtol"], atol=params["atol"],
            dtype=params["dtype"] or "float64", device=params["device"], engine=params["engine"],
            chunk=params["chunk"], timeout=params["timeout"], out=params["out"], dask=params["dask"])
        prepared = batch.prepare_batch(params["expr"], points_file=params["points_file"], n=params["batch_n"],
                                       domain=params["domains"] or None, seed=params["seed"] or 0)
    except ValueError as exc:  # BadInput is a ValueError too
        fail(exc if isinstance(exc, BadInput) else BadInput(str(exc)), as_json)
    if note:
        click.echo(f"note: {note}", err=True)
    for w in prepared.warnings:
        click.echo(f"warning: {w}", err=True)
    show = not as_json and sys.stderr.isatty() and prepared.source.n >= PROGRESS_POINTS
    try:
        with _progress(show, prepared.source.n) as progress:
            report = batch.run_prepared(prepared, options, progress)
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
