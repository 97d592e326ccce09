"""Every widget the notebooks create, built as the notebooks build it, and the front-end module of each model.

    python tests/widget_scan.py OUT.json   # writes one JSON object (tests/test_widget_modules.py runs it)

It reads each notebook's code cells (both editions; the code is the same, ``tests/test_edition.py``) and finds
every call that constructs a class of ``lib.widgets`` (``wr.RooflineExplorer(...)``, ``GenerationPlayer(...)``),
with the notebook's own import names. Each call is then run as the notebook runs it: its source text, in a
namespace made only of the notebook's own top-level statements that define the names it uses (the imports,
``device = lib.notebook.setup()``, ``model, tok = lib.load_demo("chat", device=device)``, ``mine =
rl.measure_machine(device)``, ...), found by following names back, statement by statement. A call whose names are
only bound inside an ``if`` / ``for`` / ``def`` (the optional "your own model" cell) is listed as skipped; its class
must then be built by another call.

Every ipywidgets model alive after a call counts (``ipywidgets``' own registry of instances, so widgets that are
created but not in the displayed tree, such as a ``jslink``, count too), and the displayed tree (``.widget`` or the
object itself) is walked as a check that the registry saw it all. It runs in a process of its own so that
``anywidget`` being imported by anything (plotly imports it only for a ``FigureWidget``) can be told.
"""
from __future__ import annotations

import ast
import inspect
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")


def notebooks(edition: str) -> list[Path]:
    folder = ROOT / "notebooks" / ("" if edition == "en" else edition)
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def widget_classes() -> dict[str, dict[str, object]]:
    """{module name: {name: callable}} of everything in lib.widgets that builds ipywidgets: each class or function
    defined in a lib.widgets module that subclasses ``ipywidgets.Widget`` or ``lib.widgets.live.LiveWidget``, that
    is annotated to return such a class (``attention.induction_explorer``), or whose source imports ipywidgets."""
    import importlib
    import pkgutil

    import ipywidgets

    import lib.widgets
    from lib.widgets.live import LiveWidget

    def is_widget_class(obj) -> bool:
        return inspect.isclass(obj) and issubclass(obj, (ipywidgets.Widget, LiveWidget))

    def builds_widgets(obj) -> bool:
        if is_widget_class(obj):
            return True
        made = getattr(obj, "__annotations__", {}).get("return")  # a function that returns a live widget
        if isinstance(made, str):
            made = getattr(sys.modules[obj.__module__], made, None)
        if is_widget_class(made):
            return True
        try:
            return "import ipywidgets" in inspect.getsource(obj)
        except (OSError, TypeError):
            return False

    out = {}
    for info in pkgutil.iter_modules(lib.widgets.__path__):
        mod = importlib.import_module(f"lib.widgets.{info.name}")
        out[mod.__name__] = {n: c for n, c in vars(mod).items() if (inspect.isclass(c) or inspect.isfunction(c))
                             and c.__module__ == mod.__name__ and builds_widgets(c)}
    return out


class Statements:
    """A notebook's top-level statements in order, with the names each binds and the names it reads."""

    def __init__(self, cells: list[str]):
        self.items = []  # (index, ast statement, source, bound names, read names)
        self.nested = set()  # names bound only inside compound statements
        for cell in cells:
            tree = ast.parse(cell)
            for stmt in tree.body:
                src = ast.get_source_segment(cell, stmt)
                bound, read = _bound(stmt), _read(stmt)
                if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)):
                    self.nested |= bound
                    bound = set() if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) else bound
                self.items.append((len(self.items), stmt, src, bound, read))

    def slice_for(self, names: set[str], before: int) -> list[int] | None:
        """The statements (indices, in order) that define ``names`` for a statement at ``before``: each name's
        last top-level definition before it, and theirs, recursively. None when a name has no such definition."""
        need, chosen = set(names), set()
        while need:
            name = need.pop()
            if name in dir(__builtins__) if not isinstance(__builtins__, dict) else name in __builtins__:
                continue
            defs = [i for i, _, _, bound, _ in self.items[:before] if name in bound]
            if not defs:
                return None
            i = defs[-1]
            if i not in chosen:
                chosen.add(i)
                before_i = i
                sub = self.slice_for(self.items[i][4], before_i)
                if sub is None:
                    return None
                chosen |= set(sub)
        return sorted(chosen)


def _bound(stmt) -> set[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _read(node) -> set[str]:
    stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    args = {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs}
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    # a comprehension's own loop names ({lang: ... for lang in ...}) are not read from the notebook
    loops = {n.id for c in ast.walk(node) if isinstance(c, ast.comprehension) for n in ast.walk(c.target)
             if isinstance(n, ast.Name)}
    return loads - (stored if isinstance(node, (ast.FunctionDef, ast.ListComp, ast.GeneratorExp)) else set()) - args - loops


def import_aliases(stmts: Statements) -> dict[str, str]:
    """{name in the notebook: dotted target} for every top-level import of lib.widgets modules or names."""
    out = {}
    for _, stmt, _, _, _ in stmts.items:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    out[a.asname] = a.name
        elif isinstance(stmt, ast.ImportFrom) and stmt.module:
            for a in stmt.names:
                out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    # imports inside compound statements (the optional cell's "from lib.widgets.player import GenerationPlayer")
    for _, stmt, _, _, _ in stmts.items:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and node.module and node is not stmt:
                for a in node.names:
                    out.setdefault(a.asname or a.name, f"{node.module}.{a.name}")
    return out


def call_sites(path: Path, classes: dict[str, dict[str, type]]) -> list[dict]:
    """Every call in the notebook that constructs a lib.widgets widget class."""
    cells = code_cells(path)
    stmts = Statements(cells)
    aliases = import_aliases(stmts)
    sites = []
    cell_of = []
    for k, cell in enumerate(cells):
        cell_of += [k] * len(ast.parse(cell).body)
    for i, stmt, src, _, _ in stmts.items:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            target = None
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                target = f"{aliases.get(node.func.value.id, node.func.value.id)}.{node.func.attr}"
            elif isinstance(node.func, ast.Name):
                target = aliases.get(node.func.id)
            if not target:
                continue
            module, _, name = target.rpartition(".")
            if name in classes.get(module, {}):
                sites.append({"notebook": path.name, "cell": cell_of[i], "statement": i, "class": f"{module}.{name}",
                              "call": ast.get_source_segment(cells[cell_of[i]], node), "top_level": node in
                              _top_level_calls(stmt), "reads": sorted(_read(node))})
    return sites, stmts


def _top_level_calls(stmt) -> list:
    """Calls of a statement that run whenever it runs (not inside an if / for / def)."""
    if isinstance(stmt, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.FunctionDef, ast.ClassDef)):
        return []
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]


def walk(widget, seen: dict) -> None:
    """Every widget reachable from ``widget`` through its traits (children, layout, style, links ...)."""
    import ipywidgets

    if not isinstance(widget, ipywidgets.Widget) or widget.model_id in seen:
        return
    seen[widget.model_id] = widget
    for name in widget.keys:
        value = getattr(widget, name, None)
        values = value if isinstance(value, (list, tuple)) else value.values() if isinstance(value, dict) else [value]
        for v in values:
            if isinstance(v, (list, tuple)):  # jslink's source / target: (widget, trait)
                for x in v:
                    walk(x, seen)
            else:
                walk(v, seen)


def scan() -> dict:
    from ipywidgets.widgets.widget import _instances

    classes = widget_classes()
    english, report = {}, {"notebooks": {}, "skipped": [], "widgets": [], "classes_built": [],
                           "classes_in_notebooks": [], "zh_same_calls": True}
    for edition in ("en", "zh"):
        for path in notebooks(edition):
            sites, stmts = call_sites(path, classes)
            if edition == "en":
                english[path.name] = (sites, stmts)
            else:
                calls = [(s["class"], s["call"]) for s in sites]
                if calls != [(s["class"], s["call"]) for s in english.get(path.name, ([], None))[0]]:
                    report["zh_same_calls"] = False
                    report.setdefault("zh_differs", []).append(path.name)
    for name, (sites, stmts) in english.items():
        for site in sites:
            report["classes_in_notebooks"].append(site["class"])
            order = stmts.slice_for(set(site["reads"]), site["statement"]) if site["top_level"] else None
            if order is None:
                report["skipped"].append(f"{name} code cell {site['cell']}: {site['call']}")
                continue
            namespace = {"__name__": "__notebook__"}
            before = set(_instances)
            for i in order:
                exec(compile(stmts.items[i][2], f"{name}[{i}]", "exec"), namespace)
            obj = eval(site["call"], namespace)
            shown = getattr(obj, "widget", obj)
            tree = {}
            walk(shown, tree)
            created = {k: w for k, w in _instances.items() if k not in before}
            missing = sorted(set(tree) - set(created) - before)
            for w in created.values():
                report["widgets"].append({"notebook": name, "class": site["class"], "model": w._model_name,
                                          "model_module": w._model_module, "view_module": w._view_module,
                                          "in_tree": w.model_id in tree})
            report["notebooks"].setdefault(name, []).append(
                {"call": site["call"], "statements": [stmts.items[i][2].splitlines()[0] for i in order],
                 "widgets": len(created), "tree": len(tree), "not_in_registry": missing})
            report["classes_built"].append(site["class"])
    report["classes_in_notebooks"] = sorted(set(report["classes_in_notebooks"]))
    report["classes_built"] = sorted(set(report["classes_built"]))
    report["model_modules"] = dict(Counter(w["model_module"] for w in report["widgets"]))
    report["view_modules"] = dict(Counter(str(w["view_module"]) for w in report["widgets"]))
    report["models"] = dict(Counter(f"{w['model_module']} {w['model']}" for w in report["widgets"]))
    report["anywidget_imported"] = "anywidget" in sys.modules
    return report


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's lib and tools, as pytest's pythonpath = ["."] gives the tests
    import matplotlib

    matplotlib.use("Agg")
    result = scan()  # the notebooks' own statements print (setup's "device: cpu ..."): the result goes to a file
    Path(sys.argv[1]).write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
