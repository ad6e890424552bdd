"""`interlock`: run the service, the demo, the read side and the audit tools."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from eventsourcing.persistence import PersistenceError

from interlock.domain.errors import ConfigurationError, InterlockError

# Each module adds its subcommands with `register(subparsers)`.
COMMAND_MODULES = ("interlock.cli.demo", "interlock.cli.serve", "interlock.cli.audit",
                   "interlock.cli.webhooks", "interlock.cli.replay_test", "interlock.cli.review",
                   "interlock.cli.mcp")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interlock",
        description="Event-sourced agent service whose tools can pause for a human's yes.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if exc.name not in (name, "mcp"):  # "mcp": the optional extra is not installed
                raise
            continue
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (ConfigurationError, InterlockError, PersistenceError) as exc:
        print(f"interlock {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
