"""The house as its plan: lib/ is the learner's package and never reaches into tools/; every module stands on a
floor (``FLOORS``) and imports only from its own floor or below, counting every import (at module level and
inside functions: an import deferred into a function is still an arrow); no import cycle, not even through a
function; ``import lib.model`` loads no plotting library; the core stays readable in one sitting (no function
longer than ~50 lines).

The graph: one arrow per module an import names, relative imports resolved (``from ..trace import Trace`` in
``lib.widgets.attention`` is an arrow to ``lib.trace``; ``from . import costs`` in ``lib`` is one to
``lib.costs``). A package's ``__init__`` runs before its modules, so an arrow to an ancestor package is not drawn
(``lib.i18n.outputs`` does not import ``lib.i18n``)."""
import ast
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import lib

LIB = Path(lib.__file__).resolve().parent
ROOT = LIB.parent
CORE = ("config", "model", "cache", "concat", "sampling", "generate", "trace", "tokenizer")
MAX_CORE_FUNCTION_LINES = 50

# The floors, from the ground up: a module imports only from its own floor or a lower one. A folder's entry holds
# its modules that have none of their own (``lib.serving`` holds ``lib.serving.batching``); ``lib`` itself is the
# face on top. A new module gets a floor here, or the test says so.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("words", ("lib.i18n.outputs", "lib.i18n")),  # what lib prints and draws, both languages: imports no lib
    ("shared", ("lib.checks", "lib.text", "lib.progress", "lib.device", "lib.timing", "lib.memo")),
    ("engine", ("lib.config", "lib.tokenizer", "lib.tokenization", "lib.sampling", "lib.cache", "lib.model",
                "lib.trace", "lib.generate")),
    ("numbers", ("lib.presets", "lib.costs", "lib.roofline", "lib.measure")),
    ("caches", ("lib.concat", "lib.blocks", "lib.paged", "lib.quant")),
    ("weights", ("lib.demo", "lib.corpus", "lib.lm")),  # the shipped models, their text, the real model's prompts
    ("wings", ("lib.speculative", "lib.flash", "lib.sinks", "lib.heads", "lib.fastdecode", "lib.hf",
               "lib.vllm_bridge", "lib.serving")),
    ("training", ("lib.train", "lib.train_lm")),
    ("visuals", ("lib.widgets", "lib.exercises", "lib.notebook")),
    ("face", ("lib",)),
]
PLOTTING = ("matplotlib", "plotly", "PIL", "ipywidgets")


# ------------------------------------------------------------------------------------------ the graph

@dataclass(frozen=True)
class Arrow:
    """``source`` imports ``target`` at ``line``; ``inside`` names the function it sits in (None: module level)."""

    source: str
    target: str
    line: int
    inside: str | None

    def __str__(self):
        where = f"inside {self.inside}()" if self.inside else "at module level"
        return f"{self.source} -> {self.target} ({where}, line {self.line})"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(package: Path, root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(package.rglob("*.py"))}


def _imported(node, package: list[str]) -> list[str]:
    """The full names an import statement names: ``import a.b`` -> a.b; ``from .x import y`` -> pkg.x and
    pkg.x.y (y may be a module: ``from . import costs``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = package[:len(package) - node.level + 1] if node.level else []
    mod = ".".join(base + ([node.module] if node.module else []))
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def arrows_of(path: Path, modules: dict[str, Path], root: Path = ROOT) -> list[Arrow]:
    """Every import of ``path`` that names one of ``modules``, wherever it stands (module level, a function, a
    method, a branch), resolved to full module names."""
    here = module_name(path, root)
    package = here.split(".") if path.name == "__init__.py" else here.split(".")[:-1]
    ancestors = {".".join(here.split(".")[:i]) for i in range(1, here.count(".") + 1)}
    found = []

    def visit(node, qualname, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{qualname}.{child.name}" if qualname else child.name
                visit(child, name, name if not isinstance(child, ast.ClassDef) else inside)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in dict.fromkeys(_imported(child, package)):
                    if target in modules and target != here and target not in ancestors:
                        found.append(Arrow(here, target, child.lineno, inside))
            visit(child, qualname, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), "", None)
    return found


def import_graph(package: Path = LIB, root: Path = ROOT) -> list[Arrow]:
    modules = modules_of(package, root)
    return [a for path in modules.values() for a in arrows_of(path, modules, root)]


def floor_of(name: str, floors) -> int | None:
    """The floor number (0 = the ground) of a module: its own entry, else its nearest package's (the root
    package's entry holds the root alone)."""
    table = {m: i for i, (_, members) in enumerate(floors) for m in members}
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in table and (n == len(parts) or n > 1):
            return table[key]
    return None


def arrows_up(arrows: list[Arrow], floors) -> list[str]:
    """Each arrow from a lower floor to a higher one, said with both floors' names."""
    names = [n for n, _ in floors]
    out = []
    for a in arrows:
        low, high = floor_of(a.source, floors), floor_of(a.target, floors)
        if low is not None and high is not None and high > low:
            out.append(f"{a} runs up from floor {names[low]!r} to {names[high]!r}")
    return out


def cycle_in(arrows: list[Arrow]) -> list[str] | None:
    """One import cycle (module names, the first repeated at the end), or None."""
    graph = {}
    for a in arrows:
        graph.setdefault(a.source, set()).add(a.target)
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


# ------------------------------------------------------------------------------------------ the house

def test_every_module_of_lib_stands_on_a_floor():
    homeless = [m for m in modules_of(LIB) if floor_of(m, FLOORS) is None]
    assert homeless == [], f"give these modules a floor in FLOORS (tests/test_architecture.py): {homeless}"
    listed = [m for _, members in FLOORS for m in members]
    assert len(listed) == len(set(listed)), "a module stands on two floors"
    assert not [m for m in listed if m not in modules_of(LIB)], "FLOORS names a module lib does not have"


def test_no_import_runs_up_a_floor():
    up = arrows_up(import_graph(), FLOORS)
    assert up == [], "imports that run back up a floor:\n" + "\n".join(up)


def test_lib_has_no_import_cycle():
    cycle = cycle_in(import_graph())  # imports inside functions too: a deferred import still closes a circle
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_of_lib_imports_the_course_tooling():
    for name, path in modules_of(LIB).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # inside functions too: lib never reaches into tools/
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            assert not any(m == "tools" or m.startswith("tools.") for m in mods), f"{name} imports {mods}"


# ------------------------------------------------------------------------------ the checker checks

def _house(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path / "pkg"


def test_the_checker_catches_an_import_up_a_floor_hidden_in_a_function(tmp_path):
    pkg = _house(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": """
            def check(x):
                from .high import Thing  # the arrow a module-level scan would miss
                return isinstance(x, Thing)
            """,
        "pkg/high.py": "from . import low\n\nclass Thing:\n    pass\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "class Leaf:\n    def grow(self):\n        from ..high import Thing\n        return Thing\n",
    })
    floors = [("ground", ("pkg.low",)), ("top", ("pkg.high", "pkg.sub")), ("face", ("pkg",))]
    arrows = import_graph(pkg, tmp_path)
    assert sorted(map(str, arrows)) == [
        "pkg.high -> pkg.low (at module level, line 1)",
        "pkg.low -> pkg.high (inside check(), line 3)",
        "pkg.sub.leaf -> pkg.high (inside Leaf.grow(), line 3)",  # a method, a relative import two dots up
    ]
    assert arrows_up(arrows, floors) == [
        "pkg.low -> pkg.high (inside check(), line 3) runs up from floor 'ground' to 'top'"]
    assert cycle_in(arrows) == ["pkg.high", "pkg.low", "pkg.high"]
    assert floor_of("pkg.sub.leaf", floors) == 1 and floor_of("pkg.other", floors) is None


def test_the_checker_passes_a_house_whose_imports_go_down(tmp_path):
    pkg = _house(tmp_path, {
        "pkg/__init__.py": "from .high import Thing\n",
        "pkg/low.py": "import math\n",
        "pkg/high.py": "def make():\n    from . import low\n    return low\n\nclass Thing:\n    pass\n",
    })
    floors = [("ground", ("pkg.low",)), ("top", ("pkg.high",)), ("face", ("pkg",))]
    arrows = import_graph(pkg, tmp_path)
    assert arrows_up(arrows, floors) == [] and cycle_in(arrows) is None and len(arrows) == 2


# ------------------------------------------------------------------------------- what an import loads

def test_importing_the_model_loads_no_plotting_library():
    code = textwrap.dedent(f"""
        import sys
        from lib.model import MiniTransformer  # runs lib/__init__.py first: every name of lib is there
        import lib
        print(sorted({{m.split(".")[0] for m in sys.modules}} & set({PLOTTING!r})))
        print(sorted(m for m in sys.modules if m.startswith(("lib.widgets", "lib.i18n"))))
        print(lib.notebook.__name__, "lib.notebook" in sys.modules)  # lib.notebook comes the moment it is asked for
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded, words, lazy = out.stdout.strip().split("\n")
    assert loaded == "[]", f"import lib.model loads {loaded}"
    # the engine speaks through the ground floor's words (Trace.table), never through the widgets package
    assert words == "['lib.i18n', 'lib.i18n.outputs']", f"import lib loads {words}"
    assert lazy == "lib.notebook True"


# ---------------------------------------------------------------------------------------- the core

@pytest.mark.parametrize("name", CORE)
def test_the_core_reads_in_small_functions(name):
    path = LIB / f"{name}.py"
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_CORE_FUNCTION_LINES]
    assert long == [], f"lib/{name}.py: functions over {MAX_CORE_FUNCTION_LINES} lines: {long}"


def test_all_is_the_engine_plus_one_entry_point_per_lesson():
    assert lib.__all__ == [*lib.ENGINE, *lib.LESSONS]
    assert len(set(lib.__all__)) == len(lib.__all__)
    for name in lib.__all__:
        assert hasattr(lib, name), name


def test_tools_are_not_installed_with_the_package():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'include = ["lib", "lib.*"]' in text and "packages = [" not in text
