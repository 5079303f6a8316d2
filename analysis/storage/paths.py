"""Where the project keeps its files: the cache and the downloaded models."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """The disk-cache root: ``$RG_CACHE_DIR`` or ``cache/`` in the project."""
    return Path(os.environ.get("RG_CACHE_DIR") or PROJECT_ROOT / "cache")


def models_dir() -> Path:
    """Where built-in models are fetched to: ``$RG_MODELS_DIR`` or ``<cache>/models``."""
    return Path(os.environ.get("RG_MODELS_DIR") or cache_dir() / "models")
