"""Where the project keeps its files (the cache and the downloaded models), and which sources a
hosted dashboard may open.

The CLI, run by the machine's own user, reads any path. The dashboard is a server a visitor drives
through the URL and every widget, so it calls :func:`restrict_to` at the start of each run: from
then on, in that run, every source the library is asked to open passes one of three checks here:

- a local path (a model folder, a checkpoint folder, a GGUF file, a text file, labelled data, a
  tokenizer folder): :func:`checked_path`, which resolves it (links and ``..`` followed) and refuses
  anything outside the allowed roots;
- a Hub model id or a revision: :func:`checked_hub_id`, :func:`checked_revision`;
- a Hub dataset id (``hf:NAME...``): :func:`checked_dataset_id`, ``owner/name`` or ``name`` only, so the
  datasets library is never handed a local folder.

A refusal is :func:`refusal`: the same words whether the path exists or not, a link loops, or a name
holds a NUL byte, so a visitor learns nothing about the server's files from it. The whole list of the
sources a visitor can name, and the check each goes through, is ``analysis.runs.sources``.
"""

import os
import re
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path

from huggingface_hub.utils import HFValidationError, validate_repo_id

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


def default_data_dir() -> Path:
    """``data/`` in a checkout, beside ``app.py``; ``~/.cache/readout-geometry/data`` for an installed package."""
    return PROJECT_ROOT / "data" if (PROJECT_ROOT / "pyproject.toml").exists() else default_cache_dir() / "data"


def models_dir() -> Path:
    """Where built-in models are fetched to: ``$RG_MODELS_DIR`` or ``<cache>/models``."""
    return Path(os.environ.get("RG_MODELS_DIR") or cache_dir() / "models")


def allowed_roots(setting: Iterable[str] | None = None) -> tuple[Path, ...]:
    """The folders a hosted dashboard may read: ``setting`` (the app's ``--allowed-roots``), else
    ``$RG_ALLOWED_ROOTS`` (separated by ``os.pathsep``), else the cache folder (``$RG_CACHE_DIR`` or
    ``cache/``) and :func:`default_data_dir` (``data/`` beside ``app.py``)."""
    given = list(setting or []) or [p for p in os.environ.get(ROOTS_VARIABLE, "").split(os.pathsep) if p]
    roots = given or [cache_dir(), default_data_dir()]
    return tuple(Path(root).expanduser().resolve() for root in roots)


def restrict_to(roots: tuple[Path, ...] | None) -> None:
    """From now on, in this thread's context, open paths only under ``roots`` (None: any path, as the CLI)."""
    _roots_in_force.set(None if roots is None else tuple(roots))


def roots_in_force() -> tuple[Path, ...] | None:
    """The allowed roots when a policy is active (the dashboard), else None (the CLI: any path)."""
    return _roots_in_force.get()


def refusal(what: str, text: str, roots: tuple[Path, ...]) -> InputError:
    """The one refusal of a source outside the allowed roots: it names the roots, never the source's
    fate (missing, present, a loop, an unreadable name)."""
    return InputError(f"{what} {text!r}: this server opens files only under {', '.join(map(str, roots))}. "
                      f"Put the file there (its operator sets the folders with {ROOTS_VARIABLE} or "
                      "--allowed-roots), upload it, or use the built-in model or a Hub id.")


def checked_path(text: str, what: str) -> Path:
    """``text`` as a path, refused when a policy is active and it resolves (links and ``..``
    followed) outside every allowed root, or cannot be resolved (a link loop, a NUL byte). The refusal
    is the same whether the path exists or not. Without a policy (the CLI) a NUL byte is still an
    InputError naming the value."""
    roots = roots_in_force()
    if "\x00" in text:
        raise refusal(what, text, roots) if roots is not None else \
            InputError(f"{what} {text!r}: a path cannot hold a NUL byte.")
    path = Path(text).expanduser()
    if roots is None:
        return path
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop (RuntimeError), a name the system refuses
        raise refusal(what, text, roots) from None
    if not any(resolved.is_relative_to(root) for root in roots):
        raise refusal(what, text, roots)
    return resolved


def checked_hub_id(name: str, what: str = "Model") -> str:
    """``name`` when it is a valid Hub repository id (``owner/name`` or ``name``); else an InputError
    (the uniform :func:`refusal` under a policy, the Hub's own rule in the CLI)."""
    try:
        validate_repo_id(name)
    except HFValidationError as error:
        roots = roots_in_force()
        if roots is not None:
            raise refusal(what, name, roots) from None
        raise InputError(f"{what} {name!r} is not a Hugging Face Hub id: {str(error).split('. ')[0]}.") from None
    return name


def checked_revision(revision: str | None, what: str = "Revision") -> str | None:
    """A revision (a Hub branch, tag or SHA, or a checkpoint's name); under a policy one spelled like a path
    (absolute, ``~``, a ``..`` part, a NUL byte or a backslash) gets the uniform :func:`refusal`."""
    roots = roots_in_force()
    if revision is None or roots is None:
        if revision is not None and "\x00" in revision:
            raise InputError(f"{what} {revision!r} holds a NUL byte.")
        return revision
    parts = revision.replace("\\", "/").split("/")
    if revision.startswith(("/", "~")) or ".." in parts or "\x00" in revision or "\\" in revision:
        raise refusal(what, revision, roots)
    return revision


DATASET_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def checked_dataset_id(name: str, source: str) -> str:
    """A Hub dataset id from ``source`` (``hf:NAME...``). Under a policy it must be ``owner/name`` or
    ``name`` with no ``.``/``..`` part (the datasets library also opens local folders and files); anything
    else gets the uniform :func:`refusal`. The CLI passes any name on, as the datasets library takes it."""
    roots = roots_in_force()
    if roots is None:
        return name
    if not DATASET_ID.match(name) or any(part.endswith(".") for part in name.split("/")):  # parts start alnum
        raise refusal("Hub dataset", source, roots)
    return name


def datasets_cache_dir() -> Path:
    """Where Hub datasets are downloaded and prepared: ``<cache>/datasets`` (never the user's HF cache)."""
    return cache_dir() / "datasets"
