"""``python -m analysis`` and the ``readout-geometry`` command: parse, run, turn bad input into one line."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from analysis.cli.commands import COMMANDS, check_writable
from analysis.cli.parser import build_parser
from analysis.errors import InputError


def one_line(message, category, filename, lineno, line=None) -> str:
    """Warnings (a cache entry recomputed, say) as one line each, without the source location."""
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = one_line
    args = build_parser().parse_args(argv)
    try:
        for option in ("json", "out", "prenorm_out"):
            value = getattr(args, option, None)
            check_writable(value if isinstance(value, Path) else None, "--" + option.replace("_", "-"))
        return COMMANDS[args.command](args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing partial was written to the cache", file=sys.stderr)
        return 130
