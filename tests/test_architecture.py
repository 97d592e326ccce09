"""The house as its plan: lib/ is the learner's package and never reaches into tools/; its modules import one
another in one direction (no cycle); the core stays readable in one sitting (no function longer than ~50 lines)."""
import ast
from pathlib import Path

import pytest

import lib

LIB = Path(lib.__file__).resolve().parent
ROOT = LIB.parent
CORE = ("config", "model", "cache", "concat", "sampling", "generate", "trace", "tokenizer")
MAX_CORE_FUNCTION_LINES = 50


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path) -> set[str]:
    """Modules ``path`` imports when it is imported (module level, not inside functions), resolved to full names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # "from . import costs" imports lib.costs
    ancestors = {".".join(here[:i]) for i in range(1, len(here))}  # a package runs before its modules: no cycle
    return found - ancestors


def lib_modules() -> dict[str, Path]:
    return {module_name(p): p for p in LIB.rglob("*.py")}


def test_no_module_of_lib_imports_the_course_tooling():
    for name, path in lib_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # inside functions too: lib never reaches into tools/
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            assert not any(m == "tools" or m.startswith("tools.") for m in mods), f"{name} imports {mods}"


def test_lib_has_no_import_cycle():
    modules = lib_modules()
    graph = {name: {m for m in top_level_imports(path) if m in modules and m != name}
             for name, path in modules.items()}
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)


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
