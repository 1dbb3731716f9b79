"""The package's shape (ARCHITECTURE.md): imports point down the data flow, with no cycle between
subpackages (function-level imports included), and functions stay short.

Read from the source with ``ast``; nothing is imported, except by the start-up test, which
imports the CLI in a fresh interpreter."""

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "depthwidth"

# Lowest first. A unit (a subpackage, or a top-level module) may import only units of lower
# layers (and itself): config -> run -> record -> table -> fit -> figures/answers, with the
# record format at the bottom beside the config and the orchestrator on top.
LAYERS = [
    {"depthwidth", "errors"},  # "depthwidth" = the package's __init__ (__version__)
    {"units", "console", "hostcpu", "interrupts", "config", "storage"},
    {"theory"},
    {"records"},
    {"data"},
    {"models"},
    {"experiments", "fits"},
    {"paper_figs"},
    {"pipeline"},
    {"cli"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
MAX_LINES = 100  # any function
STEPS_MAX_LINES = 60  # the two functions that must read as a short list of steps


def _unit(module: str) -> str:
    """depthwidth.fits.table -> fits; depthwidth.records -> records; depthwidth -> depthwidth."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file()


def _imports(tree: ast.AST):
    """Every depthwidth module a file imports, anywhere in it (lazy imports too), with its line;
    ``importlib.import_module("depthwidth....")`` with a literal name counts."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from ((a.name, n.lineno) for a in n.names if a.name.split(".")[0] == "depthwidth")
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module and n.module.split(".")[0] == "depthwidth":
            subs = [f"{n.module}.{a.name}" for a in n.names if _is_module(f"{n.module}.{a.name}")]
            yield from ((m, n.lineno) for m in (subs or [n.module]))
        elif (isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "import_module" and n.args
              and isinstance(n.args[0], ast.Constant) and str(n.args[0].value).startswith("depthwidth")):
            yield n.args[0].value, n.lineno


def _registered_commands(tree: ast.AST):
    """The modules in depthwidth/cli.py's ``_COMMANDS`` table, which it imports by name."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "_COMMANDS" for t in n.targets):
            yield from ((e.elts[0].value, n.lineno) for e in n.value.elts)


def _graph() -> dict[str, dict[str, list[str]]]:
    """unit -> {imported unit: ["file:line", ...]} (imports inside a unit left out)."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent)
        src = _unit(".".join(rel.with_suffix("").parts).removesuffix(".__init__"))
        tree = ast.parse(path.read_text(), str(path))
        for module, line in [*_imports(tree), *_registered_commands(tree)]:
            dst = _unit(module)
            if dst != src:
                edges[src][dst].append(f"{rel}:{line}")
    return edges


def _cycle(edges) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the DFS stack, 2 = done

    def visit(u, stack):
        state[u] = 1
        for v in sorted(edges.get(u, {})):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state and (found := visit(v, stack + [v])):
                return found
        state[u] = 2
        return None

    for u in sorted(edges):
        if u not in state and (found := visit(u, [u])):
            return found
    return None


def test_every_unit_has_a_layer():
    units = {_unit(".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"))
             for p in PKG.rglob("*.py")}
    assert units == set(RANK), f"add to LAYERS: {sorted(units - set(RANK))}; remove: {sorted(set(RANK) - units)}"


def test_no_import_cycle_between_subpackages():
    edges = _graph()
    cycle = _cycle(edges)
    if cycle:
        where = [f"{a} -> {b} ({', '.join(edges[a][b][:3])})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle: " + "; ".join(where))


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": []}, "b": {}, "c": {"a": []}}) is None


def test_imports_point_down_the_layers():
    up = [f"{src} -> {dst} ({', '.join(where[:3])})" for src, dsts in _graph().items() for dst, where in dsts.items()
          if RANK[dst] >= RANK[src]]
    assert not up, "imports that do not point down (ARCHITECTURE.md): " + "; ".join(up)


def test_the_fit_and_figure_path_never_imports_the_engine():
    # Fits and figures read stored records only; jax (models, data) and the runner stay out of them.
    g = _graph()
    bad = [f"{src} -> {dst}" for src in ("fits", "paper_figs") for dst in g[src] if dst in ("models", "data", "experiments")]
    assert not bad


def _functions():
    for path in sorted(PKG.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.relative_to(PKG.parent)}:{n.lineno} {n.name}", n


def test_no_function_over_100_lines():
    long = [f"{where} ({n.end_lineno - n.lineno + 1} lines)" for where, n in _functions()
            if n.end_lineno - n.lineno + 1 > MAX_LINES]
    assert not long, f"functions over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("name", ["train_run", "run_sweep"])
def test_the_orchestrating_functions_are_short(name):
    (n,) = [n for where, n in _functions() if n.name == name]
    assert n.end_lineno - n.lineno + 1 <= STEPS_MAX_LINES


# The storage seam (ARCHITECTURE.md, "A storage backend"): a file is written by the store
# (storage.py), whose writes are atomic, umask-respecting and the same on a path and a URL. The
# corpus cache (data/) is not a results directory: it writes its own downloads.
WRITES = {"write_text", "write_bytes", "mkstemp", "replace", "dump", "write_atomic", "write_json_atomic"}
WRITERS = {"storage.py", "records.py", "data/corpora.py", "data/prepare.py"}


# Module functions that write files, by module name as imported (os.open: any flags; the finder
# does not evaluate them).
MODULE_WRITES = {"os": {"replace", "rename", "link", "symlink", "open"},
                 "shutil": {"copy", "copy2", "copyfile", "copytree", "move"},
                 "json": {"dump"}, "pickle": {"dump"},
                 "np": {"save", "savez", "savez_compressed", "savetxt"},
                 "numpy": {"save", "savez", "savez_compressed", "savetxt"}}
OPEN_MODE = re.compile(r"[rwxabt+]{1,3}")


def _writes(tree: ast.AST):
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if base in MODULE_WRITES:
            if name in MODULE_WRITES[base]:
                yield n.lineno, name
            continue
        if isinstance(f, ast.Attribute) and name in WRITES - {"replace", "dump"} | {"tofile"}:
            yield n.lineno, name
        elif isinstance(f, ast.Name) and name in WRITES - {"replace", "dump"}:
            yield n.lineno, name
        elif name == "savefig" and n.args and not isinstance(n.args[0], ast.Name):  # a path, not a buffer
            yield n.lineno, name
        elif name in ("open", "fdopen"):
            # open(p, mode), os.fdopen(fd, mode), fs.open(p, mode); Path.open(mode): the first
            # positional argument that is a mode string, or mode=
            given = n.args[:2] + [k.value for k in n.keywords if k.arg == "mode"]
            modes = [a.value for a in given if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and OPEN_MODE.fullmatch(a.value)]
            if any(set(m) & set("wax+") for m in modes):
                yield n.lineno, "open"


def test_result_files_are_written_only_through_the_store():
    bad = [f"{path.relative_to(PKG)}:{line} {what}" for path in sorted(PKG.rglob("*.py"))
           if path.relative_to(PKG).as_posix() not in WRITERS
           for line, what in _writes(ast.parse(path.read_text()))]
    assert not bad, f"files written around depthwidth.storage: {bad}"


def test_the_write_finder_finds_writes():
    tree = ast.parse("import os, json\np.write_text('x')\nos.replace(a, b)\njson.dump(d, fh)\n"
                     "write_atomic(p, b'')\ns.replace('a', 'b')\nopen(p)\nopen(p, 'ab')\np.open(mode='w')\n"
                     # ways around the store a new-contributor review found the first finder missed
                     "p.open('w')\nfs.open(u, 'wb')\nfig.savefig('f.png')\nfig.savefig(buf)\nshutil.copy(a, b)\n"
                     "shutil.move(a, b)\nos.rename(a, b)\nos.link(a, b)\nos.open(p, flags)\nnp.save(p, x)\n"
                     "x.tofile(p)\nd.update(x)\np.open()\np.open('r')\nfs.open(u, 'rb')\nos.path.join(a)\n")
    assert sorted(w for _, w in _writes(tree)) == sorted(
        ["dump", "open", "open", "replace", "write_atomic", "write_text", "open", "open", "savefig", "copy",
         "move", "rename", "link", "open", "save", "tofile"])


# Loaded inside the functions that need them, never at import (ARCHITECTURE.md, "Start-up"):
# building the parser (every command's --help, and `query`) must not pay for them.
# numpy and mpmath too: numpy, loaded through pipeline/__init__, pipeline.summary and exp_sawtooth's
# sawtooth_train, made `depthwidth query` 0.51 s instead of 0.31 s (measured).
HEAVY_AT_IMPORT = ("jax", "flax", "optax", "orbax", "matplotlib", "ray", "scipy", "pandas", "sympy", "numpy", "mpmath")


def test_building_the_parser_imports_nothing_heavy():
    code = ("import sys; import depthwidth.cli as c; c.build_parser(); "
            f"print(' '.join(m for m in {HEAVY_AT_IMPORT!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PKG.parent)
    assert out.stdout.split() == [], f"imported when the parser is built: {out.stdout.strip()}"


def test_query_with_a_fit_and_its_intervals_imports_no_scipy():
    """`query --fit` draws Monte Carlo intervals; their root finder is numpy bisection because
    scipy.optimize alone costs ~0.84 s at import (it made `query --fit` take ~1.4 s)."""
    fit = PKG.parent / "results" / "law-long" / "fit.json"
    code = ("import sys; from depthwidth.cli import main; "
            f"rc = main(['query', '--fit', {str(fit)!r}, '--params', '1.3B,10B', '--json']); "
            "print(rc, ' '.join(m for m in ('scipy', 'jax', 'matplotlib', 'pandas') if m in sys.modules), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PKG.parent)
    assert '"ci"' in out.stdout and out.stderr.split() == ["0"], out.stderr[-2000:]
