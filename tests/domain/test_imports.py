"""domain/ depends only on the standard library, eventsourcing, pydantic and itself,
and never reads the environment nor parses a URL (the edge does both)."""

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
        "from interlock.projections import x\nfrom interlock.domain.chat.aggregate import Chat\n"
        "from interlock import api\n"
    )
    assert outer(imported_modules(sample)) == {
        "psycopg",
        "fastapi.routing",
        "interlock.projections",
        "interlock",
    }


FORBIDDEN_MODULES = {"urllib.parse"}  # parsing URLs is the edge's job (interlock.stores.urls)
FORBIDDEN_CALLS = {"environ", "getenv", "environb", "getenvb"}  # os.environ, os.getenv, ...


def edge_work(path: Path) -> set[str]:
    """Where a module reads the environment or parses URLs: what domain/ may not do."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in FORBIDDEN_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in FORBIDDEN_MODULES:
                found.add(node.module)
            if node.module == "urllib" and any(a.name == "parse" for a in node.names):
                found.add("urllib.parse")
            found.update(a.name for a in node.names if a.name in FORBIDDEN_CALLS)
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_CALLS:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_CALLS:
            found.add(node.id)
    return found


def test_domain_reads_no_environment_and_parses_no_url() -> None:
    offenders = {str(f.relative_to(DOMAIN)): sorted(edge_work(f)) for f in DOMAIN.rglob("*.py")}
    assert {f: bad for f, bad in offenders.items() if bad} == {}


def test_the_check_sees_environment_reads_and_url_parsing(tmp_path: Path) -> None:
    samples = {
        "import os\nstore = os.environ.get('INTERLOCK_STORE')\n": {"environ"},
        "import os\nsecret = os.getenv('INTERLOCK_SECRET')\n": {"getenv"},
        "from os import getenv\n": {"getenv"},
        "from os import environ as e\n": {"environ"},
        "import urllib.parse\n": {"urllib.parse"},
        "from urllib.parse import urlsplit\n": {"urllib.parse"},
        "from urllib import parse\n": {"urllib.parse"},
        "import os\npath = os.path.join('a', 'b')\n": set(),
    }
    for i, (source, expected) in enumerate(samples.items()):
        sample = tmp_path / f"s{i}.py"
        sample.write_text(source)
        assert edge_work(sample) == expected, source
