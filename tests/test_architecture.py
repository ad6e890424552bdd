"""The house's import rules, read from the source: no circle between modules, no import
inside a function to hide one, the API is built by the wiring and never imports it nor a
store, nothing below the API imports it, the read side issues no commands, its engine knows
no view, and the chat aggregate does not know the runtime. And the service's ports: readers
outside the domain ask `Interlock.position()`, never the recorder; events are appended in one
place (the repository); the application stays a small composition of the services."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders and the import names they install under (interlock/domain etc. are links to them).
PACKAGES = {"interlock.domain": "domain", "interlock.projections": "projections",
            "interlock.api": "api", "interlock": "interlock"}
LINKED = {"domain", "projections", "api"}
WIRING = {"interlock.bootstrap", "interlock.cli", "interlock.settings"}
COMMANDS = {"interlock.sweeper", "interlock.bootstrap", "interlock.cli"}
ABOVE_THE_API = ("interlock.api", *sorted(WIRING))  # the API, and what builds or runs it
THE_APPEND = "interlock.domain.storage.repository"  # the one caller of Application._record
APPLICATION = "interlock.domain.application"
APPLICATION_BUDGET = 260, 25  # lines of domain/application.py, methods of Interlock

Graph = dict[str, set[str]]


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the house by its import name."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if package == "interlock" and parts[0] in LINKED:
                continue
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`: annotations, never run."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imports(
    tree: ast.Module, known: set[str], annotations: bool = False
) -> Iterator[tuple[ast.AST, str]]:
    """Each run-time import of a known module (`from p import m` names module p.m); with
    `annotations`, the annotation-only ones (`if TYPE_CHECKING:`) too."""
    skip = set() if annotations else _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield node, sub if sub in known else node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name


def graph(found: dict[str, Path], annotations: bool = False) -> Graph:
    """Who imports whom at run time (with `annotations`, for type checkers too)."""
    known = set(found)
    edges: Graph = {}
    for name, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        edges[name] = {m for _, m in imports(tree, known, annotations)
                       if m in known and m != name}
    return edges


def circles(edges: Graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def hidden_imports(path: Path, known: set[str]) -> list[str]:
    """Imports of the house's own modules inside a function. An optional dependency may be
    imported late (inside `try: ... except ImportError`), the house's own modules may not."""
    tree = ast.parse(path.read_text(), str(path))
    optional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            "ImportError" in ast.unparse(h.type or ast.Name("")) for h in node.handlers
        ):
            optional.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    late: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in optional:
                names = [node.module] if isinstance(node, ast.ImportFrom) else [
                    a.name for a in node.names]
                late += [f"{path.name}:{node.lineno} {n}" for n in names
                         if n and n.split(".")[0] == "interlock"]
    return late


def reaches(edges: Graph, start: str, targets: set[str]) -> set[str]:
    """The modules of `targets` (or below them) that `start` imports, directly or not."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return {m for m in seen if any(m == t or m.startswith(t + ".") for t in targets)}


def reaches_past(path: Path, attr: str, *, own: bool = True) -> list[str]:
    """Calls of `<something>.attr(...)`; with `own=False`, not `self.attr(...)` (a class's
    own method of that name)."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == attr
            and (own or ast.unparse(node.func.value) != "self")]


def methods(path: Path, cls: str) -> int:
    tree = ast.parse(path.read_text(), str(path))
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    return sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in found[0].body)


def test_nothing_outside_the_domain_reads_the_recorders_position() -> None:
    found = modules()
    assert [hit for name, path in found.items() if not name.startswith("interlock.domain")
            for hit in reaches_past(path, "max_notification_id")] == []


def test_events_are_appended_in_one_place() -> None:
    found = modules()
    assert [hit for name, path in found.items() if name != THE_APPEND
            for hit in reaches_past(path, "_record", own=False)] == []


def test_the_application_stays_a_small_composition() -> None:
    path = modules()[APPLICATION]
    lines, count = APPLICATION_BUDGET
    assert len(path.read_text().splitlines()) <= lines
    assert methods(path, "Interlock") <= count


def test_no_module_circle_anywhere_in_the_house() -> None:
    found = modules()
    assert len(found) > 100
    assert circles(graph(found)) == []


# Annotation-only circles left: an aggregate and its events name each other (an event's
# `apply` takes its aggregate, as eventsourcing's nested events do). Any other is refused.
AGGREGATE_CIRCLES = [
    ["interlock.domain.chat.aggregate", "interlock.domain.chat.approval_events",
     "interlock.domain.chat.erasure_events", "interlock.domain.chat.events",
     "interlock.domain.chat.fork_events", "interlock.domain.chat.rules"],
    ["interlock.domain.review.aggregate", "interlock.domain.review.events"],
]


def test_no_circle_even_for_the_type_checker_but_aggregate_and_events() -> None:
    found = circles(graph(modules(), annotations=True))
    assert sorted(found) == AGGREGATE_CIRCLES


def below(edges: Graph, sources: str, targets: str) -> dict[str, list[str]]:
    """The modules under `sources` that import a module under `targets` directly."""
    return {m: sorted(t for t in ts if t.startswith(targets + "."))
            for m, ts in edges.items() if m.startswith(sources + ".")
            and any(t.startswith(targets + ".") for t in ts)}


def test_the_read_engine_and_backends_import_no_view() -> None:
    """Views are handed to the engine by the wiring (`projections/__init__.py` passes the
    registry), as eventsourcing's ProjectionRunner is handed its view class."""
    edges = graph(modules(), annotations=True)
    views = "interlock.projections.views"
    assert below(edges, "interlock.projections.engine", views) == {}
    assert below(edges, "interlock.projections.backends", views) == {}


def test_the_chat_domain_imports_nothing_of_the_runtime() -> None:
    """The aggregate checks tool schemas through `chat.schema.ToolSchema`, which the
    runtime's `Tool` satisfies: the runtime builds on the chat, not the other way."""
    edges = graph(modules(), annotations=True)
    assert below(edges, "interlock.domain.chat", "interlock.domain.runtime") == {}


def test_no_import_of_the_house_inside_a_function() -> None:
    found = modules()
    late = [hit for path in found.values() for hit in hidden_imports(path, set(found))]
    assert late == []


def test_the_api_does_not_import_the_wiring() -> None:
    edges = graph(modules())
    api = [m for m in edges if m.startswith("interlock.api")]
    assert {m: sorted(reaches(edges, m, WIRING)) for m in api
            if reaches(edges, m, WIRING)} == {}


def test_the_read_side_issues_no_commands_and_knows_no_http() -> None:
    edges = graph(modules())
    read_side = [m for m in edges if m.startswith("interlock.projections")]
    outer = COMMANDS | {"interlock.api"}
    assert {m: sorted(reaches(edges, m, outer)) for m in read_side
            if reaches(edges, m, outer)} == {}


def test_the_checks_see_what_they_forbid(tmp_path: Path) -> None:
    for folder in ("domain", "projections", "api", "interlock"):
        (tmp_path / folder).mkdir()
    (tmp_path / "domain" / "a.py").write_text("from interlock.domain import b\n")
    (tmp_path / "domain" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from interlock.domain import c\n"
        "def f():\n    from interlock.domain.a import x\n")
    (tmp_path / "domain" / "c.py").write_text(
        "from interlock.domain import b\n"
        "def g():\n    try:\n        import interlock.providers\n    except ImportError:\n"
        "        pass\n")
    found = modules(tmp_path)
    edges = graph(found)
    assert circles(edges) == [["interlock.domain.a", "interlock.domain.b"]]
    assert "interlock.domain.c" not in edges["interlock.domain.b"]  # annotations only
    assert circles(graph(found, annotations=True)) == [
        ["interlock.domain.a", "interlock.domain.b", "interlock.domain.c"]]
    assert below(graph(found, annotations=True), "interlock.domain", "interlock.domain") == {
        "interlock.domain.a": ["interlock.domain.b"],
        "interlock.domain.b": ["interlock.domain.a", "interlock.domain.c"],
        "interlock.domain.c": ["interlock.domain.b"]}
    assert hidden_imports(found["interlock.domain.b"], set(found)) == [
        "b.py:5 interlock.domain.a"]
    assert hidden_imports(found["interlock.domain.c"], set(found)) == []
    assert reaches(edges, "interlock.domain.c", {"interlock.domain.a"}) == {
        "interlock.domain.a"}
    (tmp_path / "api" / "d.py").write_text(
        "def f(app, self):\n    app.recorder.max_notification_id()\n    self._record(1)\n"
        "    app._record(2)\n")
    d = tmp_path / "api" / "d.py"
    assert reaches_past(d, "max_notification_id") == ["d.py:2"]
    assert reaches_past(d, "_record", own=False) == ["d.py:4"]


def test_the_api_imports_no_store() -> None:
    """The wiring hands the API its store guard and console sessions."""
    edges = graph(modules())
    api = [m for m in edges if m.startswith("interlock.api")]
    assert {m: sorted(s for s in edges[m] if s.startswith("interlock.stores")) for m in api
            if any(s.startswith("interlock.stores") for s in edges[m])} == {}


def test_nothing_below_the_api_imports_it() -> None:
    """Only the wiring and the entry points stand above the API."""
    edges = graph(modules())
    below = [m for m in edges if not m.startswith(ABOVE_THE_API)]
    assert {m: sorted(reaches(edges, m, {"interlock.api"})) for m in below
            if reaches(edges, m, {"interlock.api"})} == {}
