"""The package's shape (docs/architecture.md): folders import one way, no import cycles, no private name
across modules, nothing below the CLI imports it, imports at module top but for a few deliberate ones."""
from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "gradcli"
#: folders from the bottom up; a module may import its own folder and those before it
LAYERS = ["core", "engines", "methods", "verdict", "trace", "batch", "checks", "plotting", "explain", "api",
          "render", "testing", "pytest_plugin", "cli", "__main__", "__init__"]
#: render/json.py encodes plain data and imports nothing of gradcli, so the reports below may use it; the
#: package itself holds only its version and lazy public names
LEAVES = {"gradcli.render.json", "gradcli"}


def _modules() -> dict:
    mods = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        mods[name.removesuffix(".__init__")] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return mods


MODS = _modules()


def _imports(name: str):
    """(target module, node, inside a function, the imported name) for every gradcli import of ``name``."""
    path, tree = MODS[name]
    inner = {id(y) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for y in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: len(name.split(".")) - node.level + (path.name == "__init__.py")]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                yield (full if full in MODS else base), node, id(node) in inner, a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node, id(node) in inner, a.name


def _layer(module: str) -> int:
    part = module.split(".")[1] if module.count(".") else "__init__"
    return LAYERS.index(part)


def test_folders_import_one_way():
    upward = [f"{m} imports {t}" for m in MODS for t, *_ in _imports(m)
              if t in MODS and t not in LEAVES and _layer(t) > _layer(m)]
    assert not upward


def test_json_encoding_is_a_leaf():
    assert not [t for t, *_ in _imports("gradcli.render.json") if t.startswith("gradcli")]


def test_no_import_cycles():
    graph = {m: {t for t, *_ in _imports(m) if t in MODS and t != m} for m in MODS}
    state: dict = {}

    def cycle_from(start):  # iterative depth-first search: 0 unseen, 1 on the path, 2 done
        stack = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child, 0) == 1:
                return [n for n, _ in stack] + [child]
            elif state.get(child, 0) == 0:
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
        return None

    cycles = [c for m in sorted(graph) if state.get(m, 0) == 0 for c in [cycle_from(m)] if c]
    assert not cycles


def test_no_private_names_across_modules():
    private = [f"{m} imports {n} from {t}" for m in MODS for t, _, _, n in _imports(m)
               if t.startswith("gradcli") and t != m and n.startswith("_") and not n.startswith("__")]
    assert not private


def test_nothing_below_the_cli_imports_it():
    assert not [m for m in MODS if not m.startswith(("gradcli.cli", "gradcli.__main__"))
                for t, *_ in _imports(m) if t == "gradcli.cli" or t.startswith("gradcli.cli.")]


def test_imports_of_the_package_itself_are_at_module_top_but_a_few():
    inner = [f"{m}:{node.lineno}" for m in MODS for t, node, inside, _ in _imports(m)
             if inside and t.startswith("gradcli")]
    assert len(set(inner)) <= 10, inner


def test_modules_stay_readable():
    assert not [f"{p} {len(p.read_text().splitlines())}" for p, _ in MODS.values()
                if len(p.read_text().splitlines()) > 450]
