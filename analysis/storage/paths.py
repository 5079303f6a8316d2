"""Where the project keeps its files (the cache and the downloaded models), and which files a
hosted dashboard may open.

The CLI, run by the machine's own user, reads any path. The dashboard is a server a visitor drives
through the URL and every widget, so it calls :func:`restrict_to` at the start of each run: from
then on, in that run, every path the library is asked to open (a model folder, a checkpoint folder,
a GGUF file, a text file) must lie under an allowed root, or :func:`checked_path` refuses it with a
message that names the roots and says nothing about whether the path exists.
"""

import os
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path

from analysis.errors import InputError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ROOTS_VARIABLE = "RG_ALLOWED_ROOTS"

_roots_in_force: ContextVar[tuple[Path, ...] | None] = ContextVar("allowed_roots", default=None)


def default_cache_dir() -> Path:
    """``cache/`` in a checkout (or an editable install); ``~/.cache/readout-geometry`` for an installed package."""
    if (PROJECT_ROOT / "pyproject.toml").exists():
        return PROJECT_ROOT / "cache"
    return Path.home() / ".cache" / "readout-geometry"


def cache_dir() -> Path:
    """The disk-cache root: ``$RG_CACHE_DIR``, else :func:`default_cache_dir`."""
    return Path(os.environ.get("RG_CACHE_DIR") or default_cache_dir())


def models_dir() -> Path:
    """Where built-in models are fetched to: ``$RG_MODELS_DIR`` or ``<cache>/models``."""
    return Path(os.environ.get("RG_MODELS_DIR") or cache_dir() / "models")


def allowed_roots(setting: Iterable[str] | None = None) -> tuple[Path, ...]:
    """The folders a hosted dashboard may read: ``setting`` (the app's ``--allowed-roots``), else
    ``$RG_ALLOWED_ROOTS`` (separated by ``os.pathsep``), else the cache folder and ``data/`` beside it."""
    given = list(setting or []) or [p for p in os.environ.get(ROOTS_VARIABLE, "").split(os.pathsep) if p]
    roots = given or [cache_dir(), cache_dir().parent / "data"]
    return tuple(Path(root).expanduser().resolve() for root in roots)


def restrict_to(roots: tuple[Path, ...]) -> None:
    """From now on, in this thread's context, open paths only under ``roots``."""
    _roots_in_force.set(tuple(roots))


def roots_in_force() -> tuple[Path, ...] | None:
    """The allowed roots when a policy is active (the dashboard), else None (the CLI: any path)."""
    return _roots_in_force.get()


def checked_path(text: str, what: str) -> Path:
    """``text`` as a path, refused when a policy is active and it resolves (links and ``..``
    followed) outside every allowed root. The refusal is the same whether the path exists or not."""
    path = Path(text).expanduser()
    roots = roots_in_force()
    if roots is None:
        return path
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        raise InputError(f"{what} {text!r}: this server opens files only under {', '.join(map(str, roots))}. "
                         f"Put the file there (its operator sets the folders with {ROOTS_VARIABLE} or "
                         "--allowed-roots), upload it, or use the built-in model or a Hub id.")
    return resolved
