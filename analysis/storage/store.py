"""A result store many workers can share: immutable files named by the hash of what was computed.

Layout under the root (a local folder, a shared folder, or any fsspec URL such as ``s3://bucket/x``)::

    <namespace>/v<version>/<sha256 of the spec's canonical JSON>.json.gz   one result each

Each file is gzip-compressed JSON ``{"format", "namespace", "version", "spec", "value", "sha256",
"provenance"}``, ``sha256`` being the hash of the value's canonical JSON. Values are plain JSON, never
pickles: reading a store somebody else wrote runs no code.

Writes are atomic and first-writer-wins. On a local or shared (NFS) folder the bytes go to a hidden
temporary file, are fsynced, and are hard-linked to the final name, which fails when the name exists;
on an object store one PUT makes the object appear whole or not at all. Two sweeps writing the same
key both succeed, one file remains, and it is complete. A file that fails its checksum is set aside
as ``<name>.corrupt`` and computed again; so is one of the right format whose value has not the shape
its reader expects (``analysis.storage.shapes``). A listing of the store (:meth:`ResultStore.records`)
names such a record and skips it, so one bad file never hides the others.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analysis.errors import InputError
from analysis.storage.cache import Entry, canonical_json, library_versions, say_rebuilt, spec_key
from analysis.storage.paths import cache_dir
from analysis.storage.shapes import MAX_DEPTH, conforms, depth

FORMAT = 1
SUFFIX = ".json.gz"
RECORD_SHAPE = {"format": int, "namespace": str, "version": int, "spec": dict, "sha256": str, "provenance": dict,
                "value": Any}


class StoreFull(InputError):
    """The store's disk is full: stop writing, keep what is there."""


def default_store_url() -> str:
    """``$RG_STORE`` or the ``store`` folder of the disk cache."""
    return os.environ.get("RG_STORE") or str(cache_dir() / "store")


def _dumps(value: Any) -> str:
    """Canonical JSON that also admits NaN (an undefined z is a result, not an error)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _digest(value: Any) -> str:
    return hashlib.sha256(_dumps(value).encode()).hexdigest()


class ResultStore:
    """Immutable JSON results under ``url``; same ``get``/``put``/``get_or_compute`` as ``ResultCache``."""

    def __init__(self, url: str | Path | None = None):
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.url = str(url or default_store_url())
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as error:
            raise InputError(f"Cannot open the result store {self.url!r}: {error}") from None
        self.local = isinstance(self.fs, LocalFileSystem)
        self.set_aside: list[str] = []  # corrupt records found (and moved away) by this object
        self.skipped: list[str] = []  # records of the wrong shape a listing passed over

    def path(self, namespace: str, version: int, spec: Any) -> str:
        """Where the result for ``spec`` lives (or would live)."""
        return f"{self.root}/{spec_key(namespace, version, spec)}{SUFFIX}"

    def has(self, namespace: str, version: int, spec: Any, shape: Any) -> bool:
        """Whether a valid record is stored: it is read, its checksum and shape checked, so a corrupt file
        is set aside (and listed in ``set_aside``) and counts as missing."""
        return self.get(namespace, version, spec, shape) is not None

    def get(self, namespace: str, version: int, spec: Any, shape: Any) -> Entry | None:
        """The stored entry, or None if absent; a corrupted file, or one whose value has not ``shape``, is set
        aside (said so, one line) and None returned."""
        path = self.path(namespace, version, spec)
        record = self._read(path)
        if record is not None and not conforms(record["value"], shape):
            self._set_aside(path)
            return None
        return None if record is None else Entry(record["value"], record["provenance"], computed=False)

    def put(self, namespace: str, version: int, spec: Any, value: Any, seconds: float = 0.0) -> bool:
        """Write ``value`` unless the key is already stored; True when this call wrote it."""
        provenance = {
            "namespace": namespace, "version": int(version), "spec": json.loads(canonical_json(spec)),
            "computed_at": datetime.now(UTC).isoformat(timespec="seconds"), "seconds": round(seconds, 3),
            "host": os.uname().nodename, "libraries": library_versions(),
        }
        record = {"format": FORMAT, "namespace": namespace, "version": int(version), "spec": provenance["spec"],
                  "value": value, "sha256": _digest(value), "provenance": provenance}
        return self._write_once(self.path(namespace, version, spec), gzip.compress(_dumps(record).encode()))

    def get_or_compute(self, namespace: str, version: int, spec: Any, compute: Callable[[], Any], shape: Any) -> Entry:
        """The stored entry (of ``shape``), or compute, store and return it (a concurrent writer's copy wins)."""
        hit = self.get(namespace, version, spec, shape)
        if hit is not None:
            return hit
        start = time.perf_counter()
        value = json.loads(_dumps(compute()))
        self.put(namespace, version, spec, value, time.perf_counter() - start)
        stored = self.get(namespace, version, spec, shape)
        return Entry(stored.value if stored else value, stored.provenance if stored else {}, computed=True)

    def records(self, namespace: str, version: int, shape: Any) -> Iterator[dict]:
        """Every valid record of ``namespace/v<version>`` whose value has ``shape`` (order unspecified). A corrupt
        file is set aside; a record of the wrong shape is named (one line, and in ``skipped``) and skipped."""
        for path in self.fs.glob(f"{self.root}/{namespace}/v{int(version)}/*{SUFFIX}"):
            record, name = self._read(path), path.rsplit("/", 1)[-1]
            if record is None:
                if self.set_aside[-1:] == [path]:
                    say_rebuilt(f"Store record {name} is unreadable or fails its checksum: set aside, skipped.")
            elif not conforms(record["value"], shape):
                self.skipped.append(path)
                say_rebuilt(f"Store record {name} holds a value of the wrong shape: skipped.")
            else:
                yield record

    def _read(self, path: str) -> dict | None:
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        try:
            record = json.loads(gzip.decompress(data))
            if not conforms(record, RECORD_SHAPE) or depth(record) > MAX_DEPTH or record["format"] != FORMAT:
                raise ValueError("not a record")
            if _digest(record["value"]) != record["sha256"]:
                raise ValueError("checksum mismatch")
            return record
        except (OSError, EOFError, ValueError, RecursionError):
            self._set_aside(path)
            return None

    def _set_aside(self, path: str) -> None:
        try:
            self.fs.mv(path, f"{path}.corrupt-{uuid.uuid4().hex[:8]}")
        except (FileNotFoundError, OSError):
            return
        self.set_aside.append(path)

    def _write_once(self, path: str, data: bytes) -> bool:
        try:
            if self.local:
                return _link_once(Path(path), data)
            if self.fs.exists(path):
                return False
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            self.fs.pipe_file(path, data)
            return True
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StoreFull(f"The result store {self.url!r} is full ({os.strerror(error.errno)}): free space "
                                "or point --store elsewhere. Every result written so far is complete and kept; "
                                "run the same plan again to go on.") from None
            raise


def _link_once(path: Path, data: bytes) -> bool:
    """Write ``data`` to a temporary file beside ``path`` and hard-link it into place if ``path`` is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.parent / f".tmp-{uuid.uuid4().hex}"
    try:
        write_bytes(temporary, data)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        temporary.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes) -> None:
    """Write and fsync ``data`` (a full disk raises OSError with errno ENOSPC)."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
