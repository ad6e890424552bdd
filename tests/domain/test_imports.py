"""domain/ depends only on the standard library, eventsourcing and pydantic."""

from __future__ import annotations

import ast
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "domain"
FORBIDDEN = {
    "psycopg",
    "psycopg_pool",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "projections",
    "api",
    "providers",
    "stores",
    "cli",
    "openai",
    "anthropic",
}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_domain_imports_no_outer_layer() -> None:
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) > 5
    offenders = {str(f.relative_to(DOMAIN)): sorted(imported_roots(f) & FORBIDDEN) for f in files}
    assert {f: bad for f, bad in offenders.items() if bad} == {}


def test_the_check_sees_an_offending_import(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("import os\nfrom psycopg import sql\nimport fastapi.routing\n")
    assert imported_roots(sample) & FORBIDDEN == {"psycopg", "fastapi"}
