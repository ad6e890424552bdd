"""domain/ depends only on the standard library, eventsourcing, pydantic and itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "domain"
ALLOWED_ROOTS = set(sys.stdlib_module_names) | {"eventsourcing", "pydantic", "pydantic_core"}


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def outer(modules: set[str]) -> set[str]:
    """What a domain module may not import: anything but the allowed roots and itself."""
    return {
        m
        for m in modules
        if m.split(".")[0] not in ALLOWED_ROOTS
        and m != "interlock.domain"
        and not m.startswith("interlock.domain.")
    }


def test_domain_imports_no_outer_layer() -> None:
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) > 5
    offenders = {str(f.relative_to(DOMAIN)): sorted(outer(imported_modules(f))) for f in files}
    assert {f: bad for f, bad in offenders.items() if bad} == {}


def test_the_check_sees_an_offending_import(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "import os\nfrom psycopg import sql\nimport fastapi.routing\n"
        "from interlock.projections import x\nfrom interlock.domain.chat import Chat\n"
        "from interlock import api\n"
    )
    assert outer(imported_modules(sample)) == {
        "psycopg",
        "fastapi.routing",
        "interlock.projections",
        "interlock",
    }
