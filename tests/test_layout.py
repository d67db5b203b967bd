"""The package's structure, read from its source: no module imports another that imports it back (directly or
through others, function-level and TYPE_CHECKING imports counted: a cycle is a cycle whether or not Python defers
it), and no module takes a private name (`_x`) from another."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "llmsize"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, list[tuple[str, list[str]]]]:
    """module -> [(imported llmsize module, names taken)], every import statement at any depth."""
    mods = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, list[tuple[str, list[str]]]] = {m: [] for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("llmsize"):
                names = [a.name for a in node.names]
                subs = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in mods]
                if subs:  # `from llmsize.estimate import expected`: the submodules themselves
                    out[name] += [(s, []) for s in subs]
                elif node.module in mods:
                    out[name].append((node.module, names))
            elif isinstance(node, ast.Import):
                out[name] += [(a.name, []) for a in node.names if a.name in mods]
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), or of one importing itself."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle_and_passes_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"a"}}) == [["a"]]


def test_imports_are_read_at_any_depth():
    found = imports()
    # the commands import the estimators inside their functions (start-up stays light): those count
    assert any(m == "llmsize.estimate.plan" for m, _ in found["llmsize.commands.plan"])
    assert ("llmsize.commands.plan", []) in found["llmsize.cli"]  # `from llmsize.commands import plan`
    assert len(found) > 100


def test_no_import_cycles():
    graph = {m: {t for t, _ in deps if t != m and not m.startswith(t + ".")} for m, deps in imports().items()}
    assert cycles(graph) == []


def test_no_private_names_across_modules():
    taken = [(m, t, n) for m, deps in imports().items() for t, names in deps for n in names
             if n.startswith("_") and not n.startswith("__")]
    assert taken == []


# Each package's place: the estimators (pure, torch-free) and the catalog below the edges that read files, render
# and parse the command line; the one upward arrow allowed is the measurement rows' schemas (the dataset's, in
# catalog/) checking a recipe or a host memory with the estimators' own parsers when a row is read.
BELOW = {
    "llmsize.estimate": ("llmsize.importer", "llmsize.render", "llmsize.commands", "llmsize.cli", "llmsize.options",
                         "llmsize.measure"),
    "llmsize.catalog": ("llmsize.importer", "llmsize.render", "llmsize.commands", "llmsize.cli", "llmsize.options",
                        "llmsize.measure"),
    "llmsize.render": ("llmsize.commands", "llmsize.cli", "llmsize.importer", "llmsize.measure"),
    "llmsize.importer": ("llmsize.render", "llmsize.commands", "llmsize.cli", "llmsize.measure"),
    "llmsize.measure": ("llmsize.render", "llmsize.commands", "llmsize.cli"),
    "llmsize.options": ("llmsize.commands", "llmsize.cli", "llmsize.render", "llmsize.importer", "llmsize.measure"),
    "llmsize.commands": ("llmsize.cli",),
}
UPWARD_ALLOWED = {("llmsize.catalog.measurement", "llmsize.estimate.quant"),
                  ("llmsize.catalog.host_measurement", "llmsize.estimate.host_memory")}


def test_each_package_imports_only_what_stands_below_it():
    wrong = sorted((m, t) for m, deps in imports().items() for t, _ in deps
                   for pkg, above in BELOW.items() if (m == pkg or m.startswith(pkg + "."))
                   and any(t == a or t.startswith(a + ".") for a in above))
    assert wrong == []


def test_the_catalog_reaches_the_estimators_only_through_the_dataset_schemas():
    up = {(m, t) for m, deps in imports().items() for t, _ in deps
          if m.startswith("llmsize.catalog.") and t.startswith("llmsize.estimate")}
    assert up == UPWARD_ALLOWED
