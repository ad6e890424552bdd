"""What an operator pinned of an MCP server: what it is, and the tool list it served.

The pins live in a JSON file (`INTERLOCK_MCP_PINS`, `mcp-pins.json` by default) that
`interlock mcp pin` and `interlock mcp accept` write and `mcp_tools` reads when an agent is
built: a file, not an event, because the tools are built when the agent module is
imported, before any store is open, and because the pin is the operator's configuration,
reviewed and versioned with the agents it serves. Each decision still records it: the
pin's hash is in every MCP tool's provenance, so in the agent fingerprint of each decision.

What a server is: for `stdio:` the command line and the SHA-256 of each file it runs (the
executable, and the script or `-m` module an interpreter is given); for HTTP the URL and,
over TLS, the SHA-256 of the certificate's public key (its SubjectPublicKeyInfo).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpcore2
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from interlock.domain.chat.canonical import sha256_hex
from interlock.mcp.errors import McpCallError, McpConfigurationError
from interlock.mcp.spec import ServerSpec

PIN_FORMAT = 1
# Interpreters whose first argument that is not an option names the script they run.
INTERPRETERS = ("node", "nodejs", "deno", "bun", "bash", "sh", "ruby", "perl")
PYTHON_VALUE_OPTIONS = ("-X", "-W", "-Q")


@dataclass(frozen=True)
class Identity:
    """What a server is, as far as the client can tell before it talks to it."""

    kind: str
    command: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)  # path -> SHA-256
    url: str = ""
    tls_key_sha256: str | None = None

    def as_json(self) -> dict[str, Any]:
        if self.kind == "stdio":
            return {"kind": "stdio", "command": list(self.command), "files": dict(self.files)}
        return {"kind": "http", "url": self.url, "tls_key_sha256": self.tls_key_sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Identity:
        if data.get("kind") == "stdio":
            return cls("stdio", command=tuple(data["command"]), files=dict(data["files"]))
        return cls("http", url=str(data["url"]), tls_key_sha256=data.get("tls_key_sha256"))

    def differs_from(self, pinned: Identity) -> str | None:
        """Why this is not the pinned server, or None when it is."""
        if self.as_json() == pinned.as_json():
            return None
        if self.kind == "stdio" and pinned.kind == "stdio":
            for path, digest in pinned.files.items():
                if self.files.get(path) != digest:
                    now = self.files.get(path, "missing")
                    return f"{path} has SHA-256 {now[:16]}…, the pin says {digest[:16]}…"
            return f"it runs {list(self.files)}, the pin says {list(pinned.files)}"
        if self.tls_key_sha256 != pinned.tls_key_sha256:
            return (f"its TLS certificate key has SHA-256 {str(self.tls_key_sha256)[:16]}…, "
                    f"the pin says {str(pinned.tls_key_sha256)[:16]}…")
        return "its identity differs from the pin"


@dataclass(frozen=True)
class Pin:
    """One pinned server: its identity and the tool list an operator accepted."""

    spec: str
    identity: Identity
    server: str
    version: str
    tools: tuple[Mapping[str, Any], ...]
    tools_sha256: str
    pinned_at: str

    @property
    def sha256(self) -> str:
        """What the fingerprint records: the identity and the tool list (not the time)."""
        return sha256_hex({"identity": self.identity.as_json(), "tools": self.tools_sha256})

    def as_json(self) -> dict[str, Any]:
        return {"identity": self.identity.as_json(), "server": self.server,
                "version": self.version, "tools_sha256": self.tools_sha256,
                "tools": [dict(t) for t in self.tools], "pinned_at": self.pinned_at}

    @classmethod
    def from_json(cls, spec: str, data: Mapping[str, Any]) -> Pin:
        return cls(spec, Identity.from_json(data["identity"]), str(data["server"]),
                   str(data["version"]), tuple(data["tools"]), str(data["tools_sha256"]),
                   str(data.get("pinned_at", "")))


def tools_sha256(dumped: list[Mapping[str, Any]]) -> str:
    """The hash of a tool list: names, descriptions, schemas and annotations, by name."""
    return sha256_hex(sorted(dumped, key=lambda t: str(t["name"])))


def load_pins(path: str | Path) -> dict[str, Pin]:
    """The pins of the file, by server spec; no file: nothing pinned."""
    file = Path(path)
    if not file.exists():
        return {}
    try:
        data = json.loads(file.read_text())
        if data.get("format") != PIN_FORMAT:
            raise McpConfigurationError(f"{file}: not an MCP pin file (format {PIN_FORMAT})")
        return {spec: Pin.from_json(spec, entry) for spec, entry in data["servers"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise McpConfigurationError(f"{file}: the MCP pin file does not read: {exc}") from None


def save_pin(path: str | Path, pin: Pin) -> None:
    """Write `pin` into the file (the others kept), atomically."""
    file = Path(path)
    pins = load_pins(file)
    pins[pin.spec] = pin
    data = {"format": PIN_FORMAT,
            "servers": {spec: p.as_json() for spec, p in sorted(pins.items())}}
    part = file.with_name(file.name + ".part")
    part.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(part, file)


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def identity_of(spec: ServerSpec, tls_key_sha256: str | None = None) -> Identity:
    """A stdio server's identity, hashed from disk now; an HTTP server's, with `tls_key`."""
    if spec.kind == "http":
        return Identity("http", url=spec.url, tls_key_sha256=tls_key_sha256)
    return Identity("stdio", command=spec.argv,
                    files={str(p): file_sha256(p) for p in files_run(spec.argv)})


def files_run(argv: tuple[str, ...]) -> list[Path]:
    """The executable and the script (or `-m` module) an interpreter is told to run."""
    found = shutil.which(argv[0])
    if found is None:
        raise McpCallError(f"{argv[0]!r} is not an executable command")
    exe = Path(found).resolve()
    files = [exe]
    name = Path(argv[0]).name
    if name.startswith("python") or Path(argv[0]) == Path(sys.executable):
        files.extend(_python_script(argv[1:]))
    elif name in INTERPRETERS:
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        if script is not None and Path(script).is_file():
            files.append(Path(script).resolve())
    return files


def _python_script(args: tuple[str, ...]) -> list[Path]:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-m" and index + 1 < len(args):
            return [_module_file(args[index + 1])]
        if arg == "-c" or arg == "-":
            return []  # the code is on the command line, which the pin holds
        if arg in PYTHON_VALUE_OPTIONS:
            index += 2
            continue
        if arg.startswith("-"):
            index += 1
            continue
        return [Path(arg).resolve()]
    return []


def _module_file(name: str) -> Path:
    """The file `python -m name` runs, found as the child finds it (its cwd first), unrun."""
    path: list[str] | None = [os.getcwd(), *sys.path[1:]]
    found = None
    for part in name.split("."):
        found = PathFinder.find_spec(part, path)
        if found is None:
            raise McpCallError(f"the module {name!r} is not found")
        path = list(found.submodule_search_locations or []) or None
    assert found is not None
    if found.submodule_search_locations:  # a package runs its __main__
        main = PathFinder.find_spec("__main__", list(found.submodule_search_locations))
        if main is None or main.origin is None:
            raise McpCallError(f"the package {name!r} has no __main__")
        return Path(main.origin).resolve()
    if found.origin is None:
        raise McpCallError(f"the module {name!r} is not a file")
    return Path(found.origin).resolve()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def spki_sha256(der: bytes) -> str:
    """The SHA-256 of a DER certificate's public key (SubjectPublicKeyInfo)."""
    key = x509.load_der_x509_certificate(der).public_key()
    return hashlib.sha256(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
                          ).hexdigest()


def tls_key_of(url: str, timeout: float) -> str | None:
    """The certificate key an https URL serves now (verified as the client verifies); None
    for plain http, which has nothing to pin but its URL."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return None
    context = httpcore2.default_ssl_context()
    try:
        with socket.create_connection((parts.hostname, parts.port or 443), timeout) as raw, \
                context.wrap_socket(raw, server_hostname=parts.hostname) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as exc:
        raise McpCallError(f"cannot read its TLS certificate: {exc}") from None
    if der is None:
        raise McpCallError("it presented no TLS certificate")
    return spki_sha256(der)
