"""A disk cache of computed results, keyed by what was computed, never by when or where.

Key: ``<namespace>/v<version>/<sha256 of the spec's canonical JSON>``. The spec holds every input
that changes the result (the model's resolved identity, never a branch name like "main").

Each entry is one bytes value: a JSON header line (the checksum of the payload and the provenance:
spec, library versions, time, seconds taken), then the payload written by ``analysis.storage.codec``
(JSON and ``.npy``, never pickle). The checksum is checked before the payload is read; diskcache is
given a ``Disk`` that refuses to unpickle anything, so an entry planted in a shared cache folder
cannot run code. A bad entry is deleted, recomputed, and said so (a :class:`CacheRecomputed` warning:
one line in the CLI, a note in the app). A value is written only after it was fully computed, in one
SQLite transaction, so an interrupted computation leaves nothing behind. A per-key file lock makes
concurrent callers (two browser tabs, two processes) wait for one computation and share it. A cache
database that is corrupt, or a cache folder deleted while the program runs, is set aside or
recreated (with the same warning), never a traceback.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sqlite3
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import diskcache
import numpy
import torch
import transformers
from filelock import FileLock

from analysis.storage.codec import decode, encode
from analysis.storage.paths import cache_dir
from analysis.storage.shapes import MAX_DEPTH, conforms, depth

T = TypeVar("T")

DEFAULT_SIZE_LIMIT_GB = 20.0


class CacheRecomputed(UserWarning):
    """A cache entry or the cache database was unreadable and is being rebuilt."""


warnings.simplefilter("always", CacheRecomputed)
_listeners: list[Callable[[str], None]] = []


def on_recomputed(listener: Callable[[str], None]) -> None:
    """Also tell ``listener`` (the dashboard's note in the page) each time the cache rebuilds something."""
    _listeners.append(listener)


def say_rebuilt(message: str) -> None:
    """Tell the user a stored entry or record was set aside: one ``warning:`` line in the CLI, a note in the page."""
    warnings.warn(message, CacheRecomputed, stacklevel=4)
    for listener in _listeners:
        listener(message)


def canonical_json(spec: Any) -> str:
    """Sorted-key compact JSON; raises TypeError for anything not plain JSON (no silent str())."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_key(namespace: str, version: int, spec: Any) -> str:
    """``namespace/v<version>/<sha256(canonical_json(spec))>``."""
    digest = hashlib.sha256(canonical_json(spec).encode()).hexdigest()
    return f"{namespace}/v{int(version)}/{digest}"


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour a cached value depends on."""
    return {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__}


class RawDisk(diskcache.Disk):
    """diskcache's storage, refusing every value or key it would have to unpickle."""

    def fetch(self, mode, filename, value, read):
        if mode == diskcache.core.MODE_PICKLE:
            raise ValueError("a pickled cache value was refused")
        return super().fetch(mode, filename, value, read)

    def get(self, key, raw):
        if not raw:
            raise ValueError("a pickled cache key was refused")
        return super().get(key, raw)


@dataclass(frozen=True)
class Entry:
    """A cached value, its provenance, and whether this call computed it."""

    value: Any
    provenance: dict
    computed: bool


HEADER_SHAPE = {"sha256": str, "provenance": dict}


def pack(payload: bytes, provenance: dict) -> bytes:
    header = {"sha256": hashlib.sha256(payload).hexdigest(), "provenance": provenance}
    return json.dumps(header).encode() + b"\n" + payload


def unpack(record: bytes, shape: Any) -> tuple[Any, dict]:
    """(value, provenance) of a stored record; ValueError when it is not one, fails its checksum, or its
    value does not have ``shape`` (``analysis.storage.shapes``)."""
    if not isinstance(record, bytes) or b"\n" not in record:
        raise ValueError("not a cache record")
    head, payload = record.split(b"\n", 1)
    try:
        header = json.loads(head)
    except RecursionError:
        raise ValueError("a header nested too deeply") from None
    if not conforms(header, HEADER_SHAPE) or depth(header) > MAX_DEPTH:
        raise ValueError("a header of the wrong shape")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise ValueError("checksum mismatch")
    value = decode(payload)
    if not conforms(value, shape):
        raise ValueError(f"a value of the wrong shape ({type(value).__name__})")
    return value, header["provenance"]


class ResultCache:
    """diskcache-backed store with checksums, provenance, per-key locks and a size limit."""

    def __init__(self, directory: str | Path | None = None, size_limit_gb: float | None = None):
        self.directory = Path(directory) if directory else cache_dir() / "results"
        if size_limit_gb is None:
            size_limit_gb = float(os.environ.get("RG_CACHE_SIZE_GB", DEFAULT_SIZE_LIMIT_GB))
        self._size_limit = int(size_limit_gb * 2**30)
        self._open()

    def _open(self) -> None:
        """Open (or create) the database; a corrupt one is set aside and a new one started."""
        self._lock_dir = self.directory / "locks"
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._store = self._connect()
        except sqlite3.DatabaseError as error:
            aside = self.directory / f"cache.db.corrupt-{int(time.time())}"
            (self.directory / "cache.db").rename(aside)
            say_rebuilt(f"The cache database in {self.directory} was unreadable ({error}); it was moved to "
                        f"{aside.name} and a new one started: results are computed again.")
            self._store = self._connect()

    def _connect(self) -> diskcache.Cache:
        return diskcache.Cache(str(self.directory), size_limit=self._size_limit,
                               eviction_policy="least-recently-used", disk=RawDisk)

    def _reopen(self, reason: str) -> None:
        say_rebuilt(f"The cache in {self.directory} {reason}; it was opened again.")
        self._store.close()
        self._open()

    def _retrying(self, operation: Callable[[], T]) -> T:
        """Run a database operation; if the cache folder vanished or broke underneath, reopen it first
        (SQLite would otherwise go on writing to the deleted file) or once after the failure."""
        if not (self.directory / "cache.db").exists():
            self._reopen("was deleted while in use")
        try:
            return operation()
        except (sqlite3.Error, OSError) as error:
            self._reopen(f"failed ({type(error).__name__}: {error})")
            return operation()

    def get(self, namespace: str, version: int, spec: Any, shape: Any) -> Entry | None:
        """The stored entry, or None if absent; a bad one (unreadable, failing its checksum, or not of
        ``shape``, see ``analysis.storage.shapes``) is deleted, said so, and None returned."""
        key = spec_key(namespace, version, spec)
        try:
            record = self._retrying(lambda: self._store.get(key))
        except ValueError as error:  # a pickled value refused by RawDisk
            return self._bad(key, error)
        if record is None:
            return None
        try:
            value, provenance = unpack(record, shape)
        except (ValueError, KeyError, TypeError) as error:
            return self._bad(key, error)
        return Entry(value, provenance, computed=False)

    def holds(self, namespace: str, version: int, spec: Any) -> bool:
        """Whether an entry is stored: its key looked up, nothing read or checked (:meth:`get` reads it)."""
        key = spec_key(namespace, version, spec)
        return self._retrying(lambda: key in self._store)

    def _bad(self, key: str, error: Exception) -> None:
        say_rebuilt(f"Cache entry {key} was unreadable ({error}); it is computed again.")
        self._retrying(lambda: self._store.delete(key))
        return None

    def put(self, namespace: str, version: int, spec: Any, value: Any, seconds: float = 0.0) -> dict:
        """Store ``value`` with its provenance; returns the provenance."""
        provenance = {
            "namespace": namespace,
            "version": int(version),
            "spec": json.loads(canonical_json(spec)),
            "computed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(seconds, 3),
            "libraries": library_versions(),
        }
        record = pack(encode(value), provenance)
        self._retrying(lambda: self._store.set(spec_key(namespace, version, spec), record))
        return provenance

    def get_or_compute(self, namespace: str, version: int, spec: Any, compute: Callable[[], T], shape: Any) -> Entry:
        """Return the cached entry (of ``shape``), or compute, store and return it (one computer per key)."""
        hit = self.get(namespace, version, spec, shape)
        if hit is not None:
            return hit
        key = spec_key(namespace, version, spec)
        lock_name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock"
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self._lock_dir / lock_name)):
            hit = self.get(namespace, version, spec, shape)
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
