"""``python -m analysis`` and the ``readout-geometry`` command: parse, run, turn bad input into one line."""

from __future__ import annotations

import os
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
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted: nothing partial was written to the cache", file=sys.stderr)
        return 130
    except Exception as error:  # a bug, not bad input: one line; RG_DEBUG=1 shows the traceback
        if os.environ.get("RG_DEBUG"):
            raise
        first = (str(error).strip().splitlines() or [""])[0][:300]
        print(f"error: unexpected {type(error).__name__}: {first} (run again with RG_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1
