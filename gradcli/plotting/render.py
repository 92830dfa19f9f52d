"""Pictures of :class:`PlotData` and :class:`StepData`: text for the terminal (plotext), PNG or SVG
files (matplotlib). Both libraries are the optional ``plot`` extra and are imported only here, only
when a picture is asked for: gradcli itself runs without them.
"""
from __future__ import annotations

import importlib
import math
import os

import numpy as np

from gradcli.core.errors import BadInput
from gradcli.core.files import atomic_write, output_target
from gradcli.plotting.data import PlotData, StepData, segments

SAVE_FORMATS = {".png": "png", ".svg": "svg"}
#: Errors below this are drawn at it: an exact result (error 0) has no place on a log axis.
ERROR_FLOOR = 1e-18
COLORS = ("blue", "red", "green", "orange", "magenta", "cyan")
MPL_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:orange", "tab:purple", "tab:cyan")
METHOD_LABELS = {"forward": "forward (f(x+h)-f(x))/h", "central": "central (f(x+h)-f(x-h))/2h",
                 "complex_step": "complex step Im f(x+ih)/h"}


def need(module: str, command: str):
    """Import a plotting library, or explain which extra brings it (exit 2, one line)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BadInput(f"gradcli {command} needs the plot extra: pip install 'gradcli[plot]' "
                       f"({module.split('.')[0]} is not installed)") from None


def check_save_path(path: str) -> tuple[str, str]:
    """The file format for ``--save PATH`` and the file it replaces
    (:func:`gradcli.core.files.output_target`), before any work is done; BadInput for anything else."""
    fmt = SAVE_FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise BadInput("--save: use .png or .svg")
    return fmt, output_target(path, "--save")


# --- terminal ----------------------------------------------------------------------------------------

def _plotext(command: str, width: int, height: int, color: bool):
    plt = need("plotext", command)
    _clear(plt)
    plt.plotsize(width, height)
    if not color:
        plt.theme("clear")
    return plt


def _clear(plt) -> None:
    # plotext clears only the active figure, which after subplot() is one panel: the other panel would
    # keep the previous picture's lines (and legend) under the next one's
    plt.main()
    plt.clear_figure()


def _build(plt, color: bool) -> str:
    try:
        text = plt.build()
    finally:
        _clear(plt)
    if color:
        return text
    # plotext pads every line to the picture's width: trailing spaces are noise in a pipe or a log
    return "\n".join(line.rstrip() for line in plt.uncolorize(text).split("\n"))


def plot_terminal(data: PlotData, title: str, labels: list, width: int = 100, height: int = 30,
                  color: bool = True) -> str:
    """The function (top) and its derivative (bottom) as text; ``labels[j]`` names output j."""
    plt = _plotext("plot", width, height, color)
    plt.subplots(2, 1)
    x_unit = axis_unit(data.x)
    for row, panel in enumerate(_panels(data, labels, x_unit), 1):
        plt.subplot(row, 1)
        plt.title(title if row == 1 else _derivative_title(data))
        for j, name, pieces in panel.lines:
            for s, (xs, ys) in enumerate(pieces):
                plt.plot(xs.tolist(), ys.tolist(), color=COLORS[j % len(COLORS)], label=name if s == 0 else None)
        plt.xlim(float(data.x[0] / x_unit), float(data.x[-1] / x_unit))
        if panel.limits is not None:
            plt.ylim(*panel.limits)
        if panel.unit != 1:
            plt.ylabel(f"×{_unit_text(panel.unit)}")
    plt.xlabel(data.variable + (f" (×{_unit_text(x_unit)})" if x_unit != 1 else ""))
    return _build(plt, color)


class _Panel:
    """One panel of ``plot`` (f or df) as drawn: its lines in units of ``unit`` (and x in x's unit), each
    ``(output, label, pieces)``, and the y range shown (None: all of it)."""

    def __init__(self, lines: list, limits, unit: float):
        self.lines, self.limits, self.unit = lines, limits, unit


def _panels(data: PlotData, labels: list, x_unit: float) -> list:
    x = data.x / x_unit
    panels = []
    for Y, breaks, what in ((data.f, data.f_breaks, "f"), (data.df, data.df_breaks, "df")):
        unit = axis_unit(Y)
        Y = Y / unit
        limits = y_limits(Y)
        lines = []
        for j in range(Y.shape[0]):
            name = labels[j] if what == "f" else f"d{labels[j]}/d{data.variable}"
            pieces = segments(x, Y[j], breaks[j])
            if limits is not None:
                pieces = [p for xs, ys in pieces for p in clip_to(xs, ys, *limits)]
            lines.append((j, name, pieces))
        panels.append(_Panel(lines, limits, unit))
    return panels


def clip_to(xs: np.ndarray, ys: np.ndarray, lo: float, hi: float) -> list:
    """The parts of the line through (xs, ys) that lie within lo <= y <= hi, each ending where the line
    crosses an edge -> pieces as :func:`segments` gives them. plotext fills every step of a line with
    points at the canvas's resolution, also off the canvas: a line to a sample a million screen heights
    beyond the shown range (a spike that :func:`y_limits` leaves out) would take minutes and gigabytes."""
    X, Y = [float(xs[0])], [float(ys[0])]
    for x0, y0, x1, y1 in zip(xs[:-1].tolist(), ys[:-1].tolist(), xs[1:].tolist(), ys[1:].tolist()):
        crossings = sorted(((e - y0) / (y1 - y0), e) for e in (lo, hi) if (y0 - e) * (y1 - e) < 0)
        for t, e in crossings:
            X.append(x0 + t * (x1 - x0))
            Y.append(e)
        X.append(x1)
        Y.append(y1)
    X, Y = np.array(X), np.array(Y)
    Y[(Y < lo) | (Y > hi)] = np.nan
    return segments(X, Y)


#: plotext's tick and canvas arithmetic (numbers times powers of ten) overflows beyond about 1e306 and
#: fails on numbers below about 1e-300; an axis whose numbers lie outside this band is drawn in units of
#: a power of ten instead, said in its label (the picture files too: matplotlib warns of overflows there)
PLOTEXT_BAND = (1e-100, 1e100)


def axis_unit(values) -> float:
    """1, or the power of ten that brings the largest finite magnitude of ``values`` into [1, 10) when it
    lies outside :data:`PLOTEXT_BAND`."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return 1.0
    top = float(v.max())
    if PLOTEXT_BAND[0] <= top <= PLOTEXT_BAND[1]:
        return 1.0
    return 10.0 ** math.floor(math.log10(top))


def _unit_text(unit: float) -> str:
    return f"1e{round(math.log10(unit))}"


def steps_terminal(data: StepData, title: str, width: int = 100, height: int = 30, color: bool = True) -> str:
    """The error of each difference formula against the step, log-log, and gradcli's chosen step."""
    plt = _plotext("steps", width, height, color)
    plt.xscale("log")
    plt.yscale("log")
    plt.title(f"relative error against the step: {title}")
    markers = {"forward": "dot", "central": "x", "complex_step": "+"}
    lows, highs = [], []
    for j, (name, err) in enumerate(data.errors.items()):
        if err is None:
            continue
        h, e = _loggable(data.steps, err)
        plt.plot(h.tolist(), e.tolist(), marker=markers.get(name, "dot"), color=COLORS[j], label=name)
        lows.append(e.min())
        highs.append(e.max())
    if np.isfinite(data.chosen_step) and data.chosen_step > 0:
        plt.vline(float(data.chosen_step), "gray")
    lo_h, hi_h = float(data.steps.min()), float(data.steps.max())
    plt.xticks(*_decade_ticks(lo_h, hi_h, 6))
    if lows:
        plt.yticks(*_decade_ticks(min(lows), max(highs), 8))
    plt.xlabel(f"step h  (| at h = {data.chosen_step:.2g}: gradcli's central step)")
    return _build(plt, color)


def y_limits(Y: np.ndarray):
    """A y range that shows the shape rather than a pole's last sample (tan(x) reaches 1e3 one
    sample from its pole): the 2nd to 98th percentile with a margin, when the extremes lie far beyond
    it; None (the full range) otherwise."""
    y = Y[np.isfinite(Y)]
    if y.size < 10:
        return None
    with np.errstate(over="ignore", invalid="ignore"):  # near the largest float, a span is inf: no limits
        lo, hi = np.percentile(y, (2, 98))
        span = hi - lo
        if not np.isfinite(span) or span <= 0 or (y.max() - y.min()) <= 4 * span:
            return None
        limits = float(lo - 0.5 * span), float(hi + 0.5 * span)
    return limits if all(map(math.isfinite, limits)) else None


def _loggable(h, err):
    ok = np.isfinite(err)
    return h[ok], np.maximum(err[ok], ERROR_FLOOR)


def _decade_ticks(lo: float, hi: float, most: int):
    """Powers of ten within [lo, hi], at most ``most`` of them, labelled 1e-8 rather than 0.00000001."""
    a, b = int(np.ceil(np.log10(lo) - 1e-9)), int(np.floor(np.log10(hi) + 1e-9))
    exps = list(range(a, b + 1)) or [a]
    stride = max(1, int(np.ceil(len(exps) / most)))
    exps = exps[::-1][::stride][::-1]
    return [10.0 ** k for k in exps], [f"1e{k}" if k < -1 or k > 2 else f"{10.0 ** k:g}" for k in exps]


def _derivative_title(data: PlotData) -> str:
    if data.derivative_text and len(data.derivative_text) == 1:
        return f"d/d{data.variable} = {data.derivative_text[0]}"
    return f"derivative by {data.variable}"


# --- files -------------------------------------------------------------------------------------------

def _figure(command: str):
    need("matplotlib", command)
    # a bare Figure draws with Agg (PNG) or the SVG backend on savefig: pyplot, its global state and
    # any GUI backend stay out of it
    from matplotlib.figure import Figure

    return Figure


def plot_file(data: PlotData, path: str, title: str, labels: list) -> None:
    """The function and its derivative as a PNG or SVG file, written atomically."""
    fmt, target = check_save_path(path)
    Figure = _figure("plot")
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax_f, ax_d = fig.subplots(2, 1, sharex=True)
    x_unit = axis_unit(data.x)
    kinks = _kinks(data) / x_unit
    for ax, panel in zip((ax_f, ax_d), _panels(data, labels, x_unit)):
        for j, name, pieces in panel.lines:
            for s, (xs, ys) in enumerate(pieces):
                ax.plot(xs, ys, color=MPL_COLORS[j % len(MPL_COLORS)], label=name if s == 0 else None)
        for k, xk in enumerate(kinks):
            ax.axvline(xk, color="gray", linestyle=":", linewidth=1, label="kink" if k == 0 else None)
        ax.grid(True, alpha=0.3)
        if panel.limits is not None:
            ax.set_ylim(*panel.limits)
        if panel.unit != 1:
            ax.set_ylabel(f"×{_unit_text(panel.unit)}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best")
    ax_f.set_title(title)
    ax_d.set_title(_derivative_title(data), fontsize="medium")
    ax_d.set_xlabel(data.variable + (f" (×{_unit_text(x_unit)})" if x_unit != 1 else ""))
    ax_d.set_xlim(float(data.x[0] / x_unit), float(data.x[-1] / x_unit))
    _save(fig, target, fmt)


def _kinks(data: PlotData) -> np.ndarray:
    """Where f is continuous and f' jumps (a break of df that f does not share), marked in files: in
    the middle of the segment, since the kink lies somewhere between its two samples."""
    at = {i for f_brk, df_brk in zip(data.f_breaks, data.df_breaks) for i in set(df_brk) - set(f_brk)}
    return np.array([(data.x[i] + data.x[i + 1]) / 2 for i in sorted(at)], dtype=float)


def steps_file(data: StepData, path: str, title: str) -> None:
    """The error-against-step picture as a PNG or SVG file, written atomically."""
    fmt, target = check_save_path(path)
    Figure = _figure("steps")
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    styles = {"forward": "o-", "central": "s-", "complex_step": "^-"}
    for j, (name, err) in enumerate(data.errors.items()):
        if err is None:
            continue
        h, e = _loggable(data.steps, err)
        slope = data.slopes.get(name, {})
        fit = ", ".join(f"{side} slope {s:.2f}" for side, s in slope.items() if s is not None)
        ax.loglog(h, e, styles.get(name, "o-"), color=MPL_COLORS[j], markersize=3, linewidth=1,
                  label=METHOD_LABELS.get(name, name) + (f" ({fit})" if fit else ""))
    if np.isfinite(data.chosen_step) and data.chosen_step > 0:
        ax.axvline(data.chosen_step, color="black", linestyle="--", linewidth=1,
                   label=f"gradcli's central step h = {data.chosen_step:.3g} (error {data.chosen_error:.2g})")
    for name, h in data.optimum.items():
        ax.axvline(h, color="gray", linestyle=":", linewidth=1)
        ax.annotate(f"{name} optimum", (h, 0.02), xycoords=("data", "axes fraction"), rotation=90,
                    fontsize="x-small", color="gray", ha="right")
    ax.set_xlabel("step h")
    ax.set_ylabel(f"relative error against the {data.reference_method} reference")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    _save(fig, target, fmt)


def _save(fig, path: str, fmt: str) -> None:
    """Atomically (:func:`gradcli.core.files.atomic_write`): the old picture or the complete new one."""
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=fmt, dpi=120)
