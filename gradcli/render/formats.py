"""``--format markdown|latex``: grad and hessian reports as text to paste into notes and papers.

Markdown: the derivatives in backticks, a pipe table (one row per method: status, then each entry's
value and relative error), the verdict. LaTeX: display math from sympy's own ``latex`` of the derivative
expressions (never of user text), a plain ``tabular`` (no booktabs, no siunitx: numbers are written as
``1.2\\times10^{-16}``), and for the Hessian a ``pmatrix`` (amsmath). Both are pure functions of the
report and, for LaTeX, of the sympy expressions the caller passes in.
"""
from __future__ import annotations

import math

import numpy as np

from gradcli.methods.symbolic import load_sympy
from gradcli.render.hessian import definiteness_text
from gradcli.render.table import VERDICT_MARK, fmt_error, fmt_exact, fmt_number

FORMATS = ("markdown", "latex")
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


# --- shared pieces ---------------------------------------------------------------------------------

def _entries(report) -> list:
    """(label, latex label, output, variable index) per Jacobian entry."""
    vector = len(report.values) > 1
    out = []
    for i in range(len(report.values)):
        for k, v in enumerate(report.variables):
            f = f"f{i + 1}" if vector else "f"
            lf = f"f_{{{i + 1}}}" if vector else "f"
            out.append((f"∂{f}/∂{v}", rf"\partial {lf}/\partial {_latex_symbol(v)}", i, k))
    return out


def _point(report) -> str:
    return ", ".join(f"{k} = {fmt_exact(v)}" for k, v in report.point.items())


def _cell(m, i, k, name, reference, error: bool):
    if m.jacobian is None:
        return None
    if error:
        return None if name == reference or m.rel_error is None else m.rel_error[i, k]
    return m.jacobian[i, k]


# --- markdown --------------------------------------------------------------------------------------

def _md_escape(text: str) -> str:
    return str(text).replace("|", r"\|")


def _md_table(header: list, rows: list, align: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _md_verdict(report) -> str:
    notes = [f"- {name}: {m.status}: {m.message}" for name, m in report.methods.items() if m.message and m.status != "ok"]
    notes += [f"- {d.kind}: {d.message}" for d in report.diagnostics if d.message != report.message]
    verdict = f"**{VERDICT_MARK.get(report.status, '?')} {report.status}**" + (f": {report.message}" if report.message else "")
    return "\n".join(notes + ([""] if notes else []) + [verdict])


def _method_name(report, name) -> str:
    return f"{name} (ref)" if name == report.reference else name


def grad_markdown(report) -> str:
    """A GradReport as markdown: header, derivatives in backticks, methods x entries, the verdict."""
    parts = [f"**f({', '.join(report.variables)}) = `{report.expression}`**" + (f" at {_point(report)}" if report.point else ""),
             "value: " + ", ".join(fmt_exact(v) for v in report.values)]
    entries = _entries(report)
    if report.symbolic:
        parts.append("\n".join(f"- {lab} = `{report.symbolic[i][k]}`" for lab, _, i, k in entries))
    header, align = ["method", "status"], ["l", "l"]
    for lab, *_ in entries:
        header += [lab, "rel. error"]
        align += ["r", "r"]
    rows = []
    for name, m in report.methods.items():
        row = [_method_name(report, name), m.status]
        for _, _, i, k in entries:
            v, e = _cell(m, i, k, name, report.reference, False), _cell(m, i, k, name, report.reference, True)
            row += ["—" if v is None else fmt_number(v), fmt_error(e) or "—"]
        rows.append(row)
    parts.append(_md_table(header, rows, align))
    if report.direction is not None:
        parts.append(_md_directional(report, hvp=False))
    parts.append(_md_verdict(report))
    return "\n\n".join(parts) + "\n"


def _md_directional(report, hvp: bool) -> str:
    v = ", ".join(f"{name}={fmt_number(x, 6)}" for name, x in zip(report.variables, report.direction))
    header = ["method", "∇f·v", "rel. error"] + (["H·v", "rel. error"] if hvp else [])
    rows = []
    for name, d in report.directional.items():
        row = [_method_name(report, name), ", ".join(fmt_number(x) for x in d.derivative),
               fmt_error(d.derivative_rel_error) or "—"]
        if hvp:
            row += ["—" if d.hvp is None else ", ".join(fmt_number(x) for x in d.hvp), fmt_error(d.hvp_rel_error) or "—"]
        rows.append(row)
    return f"along v = ({v}):\n\n" + _md_table(header, rows, ["l"] + ["r"] * (len(header) - 1))


def _hessian_label(report, i, k) -> str:
    a, b = report.variables[i], report.variables[k]
    return f"∂²f/∂{a}²" if i == k else f"∂²f/∂{a}∂{b}"


def hessian_markdown(report) -> str:
    """A HessianReport as markdown: second derivatives, methods, the reference Hessian, definiteness."""
    n = len(report.variables)
    parts = [f"**f({', '.join(report.variables)}) = `{report.expression}`**" + (f" at {_point(report)}" if report.point else ""),
             f"value: {fmt_exact(report.value)}; gradient: ({', '.join(fmt_number(g) for g in report.gradient.values())})"]
    if report.symbolic:
        parts.append("\n".join(f"- {_hessian_label(report, i, k)} = `{report.symbolic[i][k]}`"
                               for i in range(n) for k in range(i, n)))
    rows = []
    for name, m in report.methods.items():
        s = report.symmetry.get(name)
        err = "—" if name == report.reference else (fmt_error(m.max_rel_error) or "—")
        rows.append([_method_name(report, name), m.status, err, "—" if s is None else ("0" if s == 0 else f"{s:.1e}")])
    parts.append(_md_table(["method", "status", "max rel. error", "asymmetry"], rows, ["l", "l", "r", "r"]))
    if report.reference_hessian is not None:
        H = report.reference_hessian
        table = _md_table([f"H ({report.reference})"] + list(report.variables),
                          [[v] + [fmt_number(H[i, k]) for k in range(n)] for i, v in enumerate(report.variables)],
                          ["l"] + ["r"] * n)
        parts.append(table)
    if report.eigenvalues is not None and report.definiteness is not None:
        parts.append(f"eigenvalues: {', '.join(fmt_number(v, 8) for v in report.eigenvalues)}; "
                     "definiteness: **{}** ({})".format(*definiteness_text(report)))
    if report.direction is not None:
        parts.append(_md_directional(report, hvp=True))
    parts.append(_md_verdict(report))
    return "\n\n".join(parts) + "\n"


# --- LaTeX -----------------------------------------------------------------------------------------

def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def _latex_symbol(name: str) -> str:
    # a Symbol built from the name (never parsed): x_1 -> x_{1}, alpha -> \alpha
    sympy = load_sympy()
    return sympy.latex(sympy.Symbol(name))


def _latex(expr) -> str:
    return load_sympy().latex(expr)


def latex_number(v, digits: int = 11) -> str:
    """``$1.2\\times10^{-16}$``; ``---`` for a missing number."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, np.floating) and np.isnan(v)):
        return "---"
    v = float(v)
    if math.isinf(v):
        return r"$\infty$" if v > 0 else r"$-\infty$"
    return f"${_sci(fmt_number(v, digits))}$"


def latex_error(e) -> str:
    text = fmt_error(e)
    return f"${_sci(text)}$" if text else "---"


def _sci(text: str) -> str:
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return rf"{mantissa}\times10^{{{int(exponent)}}}"


def _tabular(header: list, rows: list, align: str) -> str:
    lines = [rf"\begin{{tabular}}{{{align}}}", r"\hline", " & ".join(header) + r" \\", r"\hline"]
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines)


def _latex_head(report, command: str) -> list:
    lines = [f"% gradcli {command}: {report.expression}".replace("\n", " ")]
    if report.point:
        lines.append(f"% at {_point(report)}")
    return lines


def _latex_function(report, functions) -> str | None:
    args = ", ".join(_latex_symbol(v) for v in report.variables)
    if not functions:
        return None
    if len(functions) == 1:
        return rf"\[ f({args}) = {_latex(functions[0])} \]"
    return "\n".join(rf"\[ f_{{{i + 1}}}({args}) = {_latex(f)} \]" for i, f in enumerate(functions))


def _latex_verdict(report) -> str:
    notes = [f"{latex_escape(name)}: {latex_escape(m.message)}\\\\" for name, m in report.methods.items()
             if m.message and m.status != "ok"]
    verdict = f"Verdict: \\textbf{{{latex_escape(report.status)}}}" + (
        f" --- {latex_escape(report.message)}" if report.message else "")
    return "\n".join(notes + [verdict])


def grad_latex(report, derivatives=None, functions=None) -> str:
    """A GradReport as LaTeX. ``derivatives``: sympy expressions [output][variable] (from
    :func:`gradcli.methods.symbolic.derivatives`), None when sympy gave none; ``functions``: the
    outputs as sympy expressions."""
    parts = ["\n".join(_latex_head(report, "grad"))]
    f = _latex_function(report, functions)
    if f:
        parts.append(f)
    entries = _entries(report)
    if derivatives:
        vector = len(report.values) > 1
        lines = []
        for _, _, i, k in entries:
            lf = f"f_{{{i + 1}}}" if vector else "f"
            lines.append(rf"\[ \frac{{\partial {lf}}}{{\partial {_latex_symbol(report.variables[k])}}} = "
                         rf"{_latex(derivatives[i][k])} \]")
        parts.append("\n".join(lines))
    else:
        parts.append("% the symbolic derivative is unavailable")
    header = ["method", "status"]
    for _, lab, _, _ in entries:
        header += [f"${lab}$", r"rel.\ error"]
    rows = []
    for name, m in report.methods.items():
        row = [latex_escape(_method_name(report, name)), latex_escape(m.status)]
        for _, _, i, k in entries:
            row += [latex_number(_cell(m, i, k, name, report.reference, False)),
                    latex_error(_cell(m, i, k, name, report.reference, True))]
        rows.append(row)
    parts.append(_tabular(header, rows, "ll" + "rr" * len(entries)))
    parts.append(_latex_verdict(report))
    return "\n\n".join(parts) + "\n"


def _matrix_number(v) -> str:
    text = latex_number(v)
    return r"\text{undefined}" if text == "---" else text.strip("$")


def _pmatrix(cells: list) -> str:
    return r"\begin{pmatrix} " + r" \\ ".join(" & ".join(row) for row in cells) + r" \end{pmatrix}"


def hessian_latex(report, second=None, functions=None) -> str:
    """A HessianReport as LaTeX: the function, sympy's Hessian and the reference Hessian at the point as
    ``pmatrix``, a ``tabular`` of the methods, eigenvalues, definiteness, the verdict. ``second``:
    sympy expressions [i][j] of the second derivatives, None when sympy gave none."""
    n = len(report.variables)
    parts = ["\n".join(_latex_head(report, "hessian"))]
    f = _latex_function(report, functions)
    if f:
        parts.append(f)
    if second:
        parts.append(rf"\[ H = {_pmatrix([[_latex(second[i][k]) for k in range(n)] for i in range(n)])} \]")
    else:
        parts.append("% the symbolic Hessian is unavailable")
    if report.reference_hessian is not None:
        H = report.reference_hessian
        cells = [[_matrix_number(H[i, k]) for k in range(n)] for i in range(n)]
        parts.append(f"% the reference ({latex_escape(report.reference)}) at the point x_0\n"
                     rf"\[ H(x_0) = {_pmatrix(cells)} \]")
    rows = []
    for name, m in report.methods.items():
        s = report.symmetry.get(name)
        rows.append([latex_escape(_method_name(report, name)), latex_escape(m.status),
                     "---" if name == report.reference else latex_error(m.max_rel_error),
                     "---" if s is None else latex_error(s) if s else "$0$"])
    parts.append(_tabular(["method", "status", r"max rel.\ error", "asymmetry"], rows, "llrr"))
    if report.eigenvalues is not None and report.definiteness is not None:
        eig = ", ".join(latex_number(v, 8) for v in report.eigenvalues)
        kind, note = definiteness_text(report)
        parts.append(f"Eigenvalues: {eig}; definiteness: \\textbf{{{latex_escape(kind)}}} ({latex_escape(note)}).")
    parts.append(_latex_verdict(report))
    return "\n\n".join(parts) + "\n"
