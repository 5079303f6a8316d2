"""A disk cache of computed results, keyed by what was computed, never by when or where.

Key: ``<namespace>/v<version>/<sha256 of the spec's canonical JSON>``. The spec holds every input
that changes the result (the model's resolved identity, never a branch name like "main"). Each value
is stored with a checksum and its provenance (spec, library versions, time, seconds taken); an entry
whose checksum fails is deleted and recomputed. A value is written only after it was fully computed,
in one SQLite transaction, so an interrupted computation leaves nothing behind. A per-key file lock
makes concurrent callers (two browser tabs, two processes) wait for one computation and share it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import diskcache
from filelock import FileLock

from analysis.storage.paths import cache_dir

T = TypeVar("T")

DEFAULT_SIZE_LIMIT_GB = 20.0


def canonical_json(spec: Any) -> str:
    """Sorted-key compact JSON; raises TypeError for anything not plain JSON (no silent str())."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_key(namespace: str, version: int, spec: Any) -> str:
    """``namespace/v<version>/<sha256(canonical_json(spec))>``."""
    digest = hashlib.sha256(canonical_json(spec).encode()).hexdigest()
    return f"{namespace}/v{int(version)}/{digest}"


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour a cached value depends on."""
    import numpy
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


@dataclass(frozen=True)
class Entry:
    """A cached value, its provenance, and whether this call computed it."""

    value: Any
    provenance: dict
    computed: bool


class ResultCache:
    """diskcache-backed store with checksums, provenance, per-key locks and a size limit."""

    def __init__(self, directory: str | Path | None = None, size_limit_gb: float | None = None):
        self.directory = Path(directory) if directory else cache_dir() / "results"
        if size_limit_gb is None:
            size_limit_gb = float(os.environ.get("RG_CACHE_SIZE_GB", DEFAULT_SIZE_LIMIT_GB))
        self._store = diskcache.Cache(
            str(self.directory),
            size_limit=int(size_limit_gb * 2**30),
            eviction_policy="least-recently-used",
        )
        self._lock_dir = self.directory / "locks"
        self._lock_dir.mkdir(parents=True, exist_ok=True)

    def get(self, namespace: str, version: int, spec: Any) -> Entry | None:
        """The stored entry, or None if absent or corrupted (a corrupted one is deleted)."""
        key = spec_key(namespace, version, spec)
        try:
            record = self._store.get(key)
            if record is None:
                return None
            payload, digest, provenance = record
            if hashlib.sha256(payload).hexdigest() != digest:
                raise ValueError("checksum mismatch")
            return Entry(pickle.loads(payload), provenance, computed=False)
        except Exception:  # unreadable file, truncated pickle, wrong layout: recompute
            self._store.delete(key)
            return None

    def put(self, namespace: str, version: int, spec: Any, value: Any, seconds: float = 0.0) -> dict:
        """Store ``value`` with its provenance; returns the provenance."""
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        provenance = {
            "namespace": namespace,
            "version": int(version),
            "spec": json.loads(canonical_json(spec)),
            "computed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(seconds, 3),
            "libraries": library_versions(),
        }
        record = (payload, hashlib.sha256(payload).hexdigest(), provenance)
        self._store.set(spec_key(namespace, version, spec), record)
        return provenance

    def get_or_compute(
        self, namespace: str, version: int, spec: Any, compute: Callable[[], T]
    ) -> Entry:
        """Return the cached entry, or compute, store and return it (one computer per key)."""
        hit = self.get(namespace, version, spec)
        if hit is not None:
            return hit
        key = spec_key(namespace, version, spec)
        lock_name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock"
        with FileLock(str(self._lock_dir / lock_name)):
            hit = self.get(namespace, version, spec)
            if hit is not None:
                return hit
            start = time.perf_counter()
            value = compute()
            provenance = self.put(namespace, version, spec, value, time.perf_counter() - start)
        return Entry(value, provenance, computed=True)


@functools.lru_cache(maxsize=4)
def _cache_at(directory: str) -> ResultCache:
    return ResultCache(directory)


def default_cache() -> ResultCache:
    """The process-wide cache at ``<cache_dir>/results`` (re-read from the environment each call)."""
    return _cache_at(str(cache_dir() / "results"))
