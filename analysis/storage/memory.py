"""The engine's memory: what computations keep in RAM between calls, in one object.

Layers' PCAs, null and candidate bases, readout bases, the layers' CCR-0 projections and previews live here under
one size limit in bytes (``RG_ENGINE_MEMORY_MB``; default 1024, or an eighth of the GPU's memory on a CUDA machine
when that is more: at d = 1024, 512 MB was full after a few moves, and the layers' projections a move's preview
starts from were pushed out while it ran) with one eviction rule: least recently used first out. Work nobody waits
for uses it through :class:`ModestMemory`, which pushes nothing out. Beside them, under a limit of its own of the
same size: what one call hands over to the next (a preview's projections to the exact run after it), one group at a
time.
It is passed in as the disk cache is (``memory=``, default :func:`default_memory`, the process's), so a
test makes its own and clears nothing private.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")
DEFAULT_LIMIT_MB = 1024


def size_of(value) -> int:
    """Bytes a remembered value holds: arrays and tensors by their data, containers and dataclasses by their parts."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(size_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return sum(size_of(item) for item in value)
    if isinstance(value, dict):
        return sum(size_of(item) for item in value.values())
    if isinstance(value, (bytes, str)):
        return len(value)
    return 64


class EngineMemory:
    """Values by (kind, key), at most ``limit_bytes`` in all (the most recent one is kept even when larger)."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_MB * 2**20) -> None:
        self.limit_bytes = limit_bytes
        self.items: OrderedDict[tuple[str, Hashable], tuple[object, int]] = OrderedDict()
        self.used = 0
        self.lock = threading.Lock()
        self.handed: tuple[Hashable, dict] = (None, {})

    def get(self, kind: str, key: Hashable):
        """The value remembered under (kind, key), now the most recently used; None when there is none."""
        with self.lock:
            found = self.items.get((kind, key))
            if found is None:
                return None
            self.items.move_to_end((kind, key))
            return found[0]

    def put(self, kind: str, key: Hashable, value: T, push_out: bool = True) -> T:
        """Remember ``value``; the least recently used values go until the rest fits the limit. Without ``push_out``,
        ``value`` is remembered only where it fits beside the others (nothing goes)."""
        size = size_of(value)
        with self.lock:
            old = self.items.get((kind, key))
            if not push_out and self.used + size - (old[1] if old else 0) > self.limit_bytes:
                return value
            self.items.pop((kind, key), None)
            self.used += size - (old[1] if old else 0)
            self.items[(kind, key)] = (value, size)
            while self.used > self.limit_bytes and len(self.items) > 1:
                _, (_, freed) = self.items.popitem(last=False)
                self.used -= freed
        return value

    def remember(self, kind: str, key: Hashable, make: Callable[[], T]) -> T:
        """The value under (kind, key), made (outside the lock) and remembered when missing."""
        found = self.get(kind, key)
        return found if found is not None else self.put(kind, key, make())

    def hand_over(self, group: Hashable, key: Hashable, value) -> bool:
        """Keep ``value`` for one :meth:`take` of (``group``, ``key``), beside the remembered values: one group at a
        time (e.g. one sweep's, a value per layer; another group's values are dropped) and at most ``limit_bytes`` of
        it (False, nothing kept, past that)."""
        size = size_of(value)
        with self.lock:
            if self.handed[0] != group:
                self.handed = (group, {})
            kept = self.handed[1]
            if sum(size_of(v) for v in kept.values()) + size > self.limit_bytes:
                return False
            kept[key] = value
            return True

    def take(self, group: Hashable, key: Hashable):
        """The value handed over under (``group``, ``key``), forgotten now; None when there is none. Values handed over
        under another group are dropped: the run they waited for did not come."""
        with self.lock:
            if self.handed[0] != group:
                self.handed = (None, {})
            return self.handed[1].pop(key, None)

    def count(self, kind: str) -> int:
        with self.lock:
            return sum(1 for k, _ in self.items if k == kind)

    def copy(self, kinds: tuple[str, ...] | None = None) -> EngineMemory:
        """A new memory under the same limit holding the values remembered here (only those of ``kinds`` when given)
        and, with every kind, what is handed over: the same values, not copies (the engine replaces a value, never
        changes it). A bench replays a move from the same starting memory with it."""
        with self.lock:
            copied = EngineMemory(self.limit_bytes)
            copied.items = OrderedDict((name, item) for name, item in self.items.items()
                                       if kinds is None or name[0] in kinds)
            copied.used = sum(size for _, size in copied.items.values())
            if kinds is None:
                copied.handed = (self.handed[0], dict(self.handed[1]))
            return copied


class ModestMemory(EngineMemory):
    """``memory`` as work nobody waits for uses it (the background's exact runs of nearby settings): it reads every
    value and remembers one only where it fits beside the others, pushing none of them out. At d = 2048 a fill at
    k = 512 pushed a visitor's candidate bases at k = 1024 (847 MB) out of 1 GiB, and the visitor's next move drew
    them again; a fill's result goes to the disk cache, which is what it runs for."""

    def __init__(self, memory: EngineMemory) -> None:  # no state of its own: ``memory``'s
        self.shared = memory

    @property
    def limit_bytes(self) -> int:
        return self.shared.limit_bytes

    def get(self, kind: str, key: Hashable):
        return self.shared.get(kind, key)

    def put(self, kind: str, key: Hashable, value: T, push_out: bool = False) -> T:
        """Remember ``value`` where it fits beside the others; never push one out."""
        return self.shared.put(kind, key, value, push_out=False)

    def hand_over(self, group: Hashable, key: Hashable, value) -> bool:
        return self.shared.hand_over(group, key, value)

    def take(self, group: Hashable, key: Hashable):
        return self.shared.take(group, key)

    def count(self, kind: str) -> int:
        return self.shared.count(kind)

    def copy(self, kinds: tuple[str, ...] | None = None) -> EngineMemory:
        return self.shared.copy(kinds)


def default_limit_mb() -> int:
    """``RG_ENGINE_MEMORY_MB``; else ``DEFAULT_LIMIT_MB``, or on a CUDA machine an eighth of the GPU's memory when
    that is more (17 GiB on an H200). At d = 2048 the candidate bases at k = 1024 alone take 847 MB: under 1 GiB the
    neighbours' fill pushed them out, and the next move at that k drew them again."""
    if os.environ.get("RG_ENGINE_MEMORY_MB"):
        return int(os.environ["RG_ENGINE_MEMORY_MB"])
    gpu = torch.cuda.get_device_properties(0).total_memory // 8 // 2**20 if torch.cuda.is_available() else 0
    return max(DEFAULT_LIMIT_MB, gpu)


@functools.cache
def default_memory() -> EngineMemory:
    """The process's engine memory (:func:`default_limit_mb`, read once)."""
    return EngineMemory(default_limit_mb() * 2**20)
