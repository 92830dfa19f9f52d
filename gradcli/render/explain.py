"""The rich rendering of an Explanation: one section per method, in the order a reader follows them."""
from __future__ import annotations


from gradcli.render.screen import Group, Rule, Table, Text, Tree
from gradcli.explain import Explanation, Gap
from gradcli.render.table import fmt_error, fmt_exact, fmt_number, header


#: The tableau's columns agree to many digits: enough of them to see where they stop agreeing.
TABLEAU_DIGITS = 14
#: The tree indents this many levels at most; deeper rows stay at this indent and say their depth, so a
#: chain of 8,000 nodes prints 8,000 short lines, not 8,000 lines of up to 32,000 characters of guides.
MAX_INDENT = 16


def num(v) -> str:
    return fmt_number(v)


def _heading(title: str) -> Rule:
    return Rule(Text(title, style="bold"), style="dim")


def _table(*columns, title=None) -> Table:
    table = Table(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, justify="left" if name in ("", "step", "node", "operation", "entry") else "right")
    return table


def _gap_row(table: Table, gap: Gap, what: str) -> None:
    cells = [""] * len(table.columns)
    cells[0] = "…"
    cells[1 if len(cells) > 1 else 0] = f"… {gap.gap} more {what} …"
    table.add_row(*(Text(c, style="dim") for c in cells))


def _entry_label(ex: Explanation, output: int, var: str) -> str:
    return f"∂f{output + 1}/∂{var}" if len(ex.values) > 1 else f"∂f/∂{var}"


def _header(ex: Explanation) -> Text:
    head = header(ex.variables, ex.expression, ex.point)
    head.append(f"value: {', '.join(fmt_exact(v) for v in ex.values)}\n")
    head.append(f"{ex.nodes} nodes (v0 … v{ex.nodes - 1}), in topological order")
    for note in ex.notes:
        head.append(f"\nnote: {note}", style="yellow")
    return head


def render_tree(ex: Explanation) -> Tree:
    """The flat pre-order rows as a rich Tree, built with a stack of open branches (no recursion)."""
    root = Tree(Text("f" if len(ex.values) == 1 else "outputs", style="bold"), guide_style="dim")
    open_: list = [root]  # open_[d] is the branch rows of depth d attach to
    for row in ex.tree:
        text = Text()
        depth = min(row.depth, MAX_INDENT)
        if row.depth > depth:
            text.append(f"[depth {row.depth}] ", style="dim")
        if row.output is not None and len(ex.values) > 1:
            text.append(f"f{row.output + 1}: ", style="bold")
        if row.kind == "shared":
            text.append(row.text, style="cyan")
        elif row.kind == "elided":
            text.append(row.text, style="dim")
        else:
            text.append(row.text)
            if row.uses > 1:
                text.append(f"  (used {row.uses}×)", style="cyan")
        del open_[depth + 1:]
        open_.append(open_[depth].add(text))
    if ex.tree_omitted:
        root.add(Text(f"… {ex.tree_omitted} more nodes not shown (--all)", style="dim"))
    return root


def render_wengert(ex: Explanation) -> Group:
    direction = ", ".join(f"{k}={fmt_number(v, 6)}" for k, v in ex.tangent.items())
    table = _table("step", "operation", "value", "tangent")
    for s in ex.wengert:
        if isinstance(s, Gap):
            _gap_row(table, s, "steps")
            continue
        what = {"var": " (input)", "const": " (constant)"}.get(s.op, "")
        # an input or a constant exactly, as the header shows the point: 1.0000000000000002 is not 1
        value = fmt_exact(s.value) if what and s.value is not None else num(s.value)
        table.add_row(s.label, s.text + what, value, num(s.tangent))
    out = Text()
    for k, d in enumerate(ex.directional):
        name = f"∇f{k + 1}·v" if len(ex.values) > 1 else "∇f·v"
        out.append(f"{name} = {num(d)}", style="bold")
        out.append(" (the tangent of the output)\n" if k == len(ex.directional) - 1 else "\n")
    return Group(Text(f"tangent v: {direction}; each tangent is Σ partial × the argument's tangent"), table, out)


def accumulation(row) -> str:
    """``v0.adjoint = 0.3 (from v2) + 0.07 (from v3) = 0.37`` for a node reached along several edges."""
    terms = " + ".join(f"{num(s['contribution'])} (from {s['label']})" for s in row.sources)
    return f"{row.label}.adjoint = {terms} = {num(row.adjoint)}"


def render_sweep(ex: Explanation, sweep) -> Group:
    table = _table("node", "adjoint", "→ argument", "local partial", "contribution")
    sums = []
    for row in sweep.rows:
        if isinstance(row, Gap):
            _gap_row(table, row, "nodes")
            continue
        name = Text(f"{row.label} = {row.text}")
        adj = num(row.adjoint) + (" (seed)" if row.node == sweep.node else " Σ" if len(row.sources) > 1 else "")
        if len(row.sources) > 1:
            sums.append(row)
        if not row.edges:
            table.add_row(name, adj, "", "", "")
        for k, e in enumerate(row.edges):
            table.add_row(name if k == 0 else "", adj if k == 0 else "", e.label, num(e.partial),
                          num(e.contribution))
    parts = [table]
    if sums:
        text = Text("used in several places: the adjoint sums adjoint × partial over every path\n")
        for row in sums:
            text.append(accumulation(row) + "\n")
        parts.append(text)
    grad = Text()
    for v, g in sweep.gradient.items():
        grad.append(f"{_entry_label(ex, sweep.output, v)} = {num(g)}\n", style="bold")
    parts.append(grad)
    return Group(*parts)


def render_symbolic(ex: Explanation) -> Text:
    sym = ex.symbolic
    text = Text()
    if sym["derivatives"] is None:
        text.append(f"{sym['status']}: {sym['message']}", style="dim")
        return text
    for k, row in enumerate(sym["derivatives"]):
        for v, d in row.items():
            text.append(f"{_entry_label(ex, k, v)} = ", style="bold")
            text.append(d + "\n")
    return text


def render_central(ex: Explanation) -> Group:
    c = ex.central
    parts = [Text("(f(x+h) - f(x-h)) / 2h at steps h = eps^(1/3)·s: first at the natural scale s = max(|x|, 1), "
                  "cross-checked at the smallest (s = 1e-6·min(|x|, 1)); at all 13 candidate scales between them only "
                  "where truncation still outweighs round-off there or the smallest disagrees. The error estimate is the "
                  "disagreement of h, 2h and 4h plus round-off and the gap to every smaller step; the smallest wins")]
    summary = _table("entry", "chosen h", "estimate", "error estimate")
    for e in c["entries"]:
        summary.add_row(_entry_label(ex, e.output, e.variable), num(e.step), num(e.estimate), fmt_error(e.error) or "—")
    parts.append(summary)
    for e in c["entries"]:
        parts.append(Text(f"{_entry_label(ex, e.output, e.variable)}: the candidates (→ chosen)", style="bold"))
        table = _table("", "h", "D(h)", "error estimate")
        for j, cand in enumerate(e.candidates):
            style = "bold green" if j == e.chosen else ""
            table.add_row(Text("→" if j == e.chosen else str(cand["index"]), style=style), Text(num(cand["h"]), style=style),
                          Text(num(cand["estimate"]), style=style),
                          Text(fmt_error(cand["error"]) or "—", style=style))
        parts.append(table)
    if c["message"]:
        parts.append(Text(f"central: {c['message']}", style="yellow"))
    return Group(*parts)


def render_richardson(ex: Explanation) -> Group:
    r = ex.richardson
    parts = [Text("central differences at h0, h0/2, h0/4, ...; column j cancels the h^(2j) error term; "
                  "the entry that changes least from its neighbours is the estimate")]
    for e in r["entries"]:
        ncols = max(len(row["columns"]) for row in e.rows)
        title = (f"{_entry_label(ex, e.output, e.variable)}: h0 = {num(e.h0)}, ratio {fmt_number(e.ratio)}; "
                 f"estimate {num(e.estimate)} (row {e.chosen_row}, column {e.chosen_column}), "
                 f"error estimate {fmt_error(e.error) or '—'}; stopped at row {e.stopped_row}")
        parts.append(Text(title, style="bold"))
        table = _table("", "h", "D(h)", *(f"order {j}" for j in range(1, ncols)))
        for row in e.rows:
            cells = []
            for j, v in enumerate(row["columns"]):
                chosen = row["row"] == e.chosen_row and j == e.chosen_column
                cells.append(Text(fmt_number(v, TABLEAU_DIGITS) + (" ←" if chosen else ""),
                                  style="bold green" if chosen else ""))
            cells += [""] * (ncols - len(cells))
            table.add_row(str(row["row"]), num(row["h"]), *cells)
        parts.append(table)
    if r["message"]:
        parts.append(Text(f"richardson: {r['message']}", style="yellow"))
    return Group(*parts)


def render_explanation(ex: Explanation) -> Group:
    parts = [_header(ex), _heading("The graph (each node once; ↑ marks a shared node used again)"),
             render_tree(ex), _heading("Forward mode: the Wengert list"), render_wengert(ex)]
    for sweep in ex.sweeps:
        which = f" of f{sweep.output + 1}" if len(ex.values) > 1 else ""
        parts += [_heading(f"Reverse mode{which}: adjoints from the output back, adjoint × local partial per edge"),
                  render_sweep(ex, sweep)]
    parts += [_heading("Symbolic (sympy's own rules)"), render_symbolic(ex),
              _heading("Central differences"), render_central(ex),
              _heading("Richardson extrapolation (Ridders' tableau)"), render_richardson(ex)]
    if ex.diagnostics:
        diag = Text()
        for d in ex.diagnostics:
            diag.append(f"{d.kind}: ", style="bold yellow")
            diag.append(d.message + "\n")
        parts += [_heading("At this point"), diag]
    return Group(*parts)
