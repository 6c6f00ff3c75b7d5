"""``partplan`` console script: a thin argparse layer over the Python API.

Each command lives in its own module of this package exposing
``register(subparsers)``; the parser it adds sets ``func(args) -> int``.
Every :class:`partplan.errors.PartplanError` is printed as one line
(``partplan: error: ...``) with exit status 2, never as a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from partplan import __version__
from partplan.errors import PartplanError

# command modules, in --help order; a module absent from this install is skipped
COMMANDS = ["analyze", "partition", "plan", "run", "train", "validate", "inspect", "export", "datasets", "convert", "bench",
            "demo", "topology"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="partplan",
        description="Partition graphs and plan the communication of distributed SpMM / GNN / BFS jobs.")
    parser.add_argument("--version", action="version", version=f"partplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"partplan.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"partplan.cli.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("partplan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` etc.: stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
