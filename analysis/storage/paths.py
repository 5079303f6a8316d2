"""Where the project keeps its files: the cache and the downloaded models."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
