"""Cached values to bytes and back without pickle, so reading a cache entry never runs code.

A value is a tree of None, bool, int, float, str, lists, tuples, str-keyed dicts, numpy arrays (any
dtype but ``object``) and dataclasses registered with :func:`storable`. It is written as an ``.npz``
archive: the tree as JSON (``__json__``, arrays replaced by their index) beside one ``.npy`` per
array. :func:`decode` reads the archive with ``allow_pickle=False`` and builds only registered
classes, by name; anything else is a ``ValueError`` (the cache then recomputes the entry).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from typing import Any

import numpy as np

from analysis.storage.shapes import MAX_DEPTH, conforms, depth, field_shapes

_STORABLE: dict[str, type] = {}


def storable(cls: type) -> type:
    """Class decorator: instances of this dataclass may be cached (rebuilt from their fields)."""
    assert dataclasses.is_dataclass(cls), f"{cls.__name__} must be a dataclass to be storable"
    _STORABLE[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


def encode(value: Any) -> bytes:
    """The ``.npz`` bytes of ``value``; TypeError for anything outside the allowed tree."""
    arrays: list[np.ndarray] = []

    def tree(node: Any) -> Any:
        if node is None or isinstance(node, bool | str):
            return node
        if isinstance(node, int | np.integer):
            return int(node)
        if isinstance(node, float | np.floating):
            return float(node) if math.isfinite(node) else {"__float__": repr(float(node))}
        if isinstance(node, np.ndarray):
            if node.dtype.hasobject:
                raise TypeError("object arrays cannot be cached (they would need pickle)")
            arrays.append(node)
            return {"__array__": len(arrays) - 1}
        if isinstance(node, tuple):
            return {"__tuple__": [tree(x) for x in node]}
        if isinstance(node, list):
            return [tree(x) for x in node]
        if isinstance(node, dict):
            if not all(isinstance(key, str) for key in node):
                raise TypeError("only dicts with str keys can be cached")
            return {"__dict__": {key: tree(x) for key, x in node.items()}}
        name = f"{type(node).__module__}.{type(node).__qualname__}"
        if name in _STORABLE:
            return {"__class__": name, "fields": {f.name: tree(getattr(node, f.name))
                                                 for f in dataclasses.fields(node)}}
        raise TypeError(f"{name} cannot be cached: register it with @storable or store plain values")

    header = json.dumps(tree(value), allow_nan=False).encode()
    buffer = io.BytesIO()
    np.savez(buffer, __json__=np.frombuffer(header, dtype=np.uint8), **{f"a{i}": a for i, a in enumerate(arrays)})
    return buffer.getvalue()


def _archive(data: bytes) -> tuple[Any, dict[str, np.ndarray]]:
    """(the JSON tree, the arrays by name) of an ``.npz`` archive; ValueError for anything else."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            header = json.loads(archive["__json__"].tobytes())
            arrays = {name: archive[name] for name in archive.files if name != "__json__"}
    except (OSError, ValueError, KeyError) as error:  # not an archive, a pickle, no header, bad JSON
        raise ValueError(f"not a cache value: {error}") from None
    except RecursionError:
        raise ValueError("not a cache value: JSON nested too deeply to parse") from None
    if depth(header) > MAX_DEPTH:
        raise ValueError(f"not a cache value: nested deeper than {MAX_DEPTH} levels")
    return header, arrays


def decode(data: bytes) -> Any:
    """The value :func:`encode` wrote; ValueError for anything else (no pickle is ever loaded)."""
    header, arrays = _archive(data)

    def build(node: Any) -> Any:
        if isinstance(node, list):
            return [build(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "__array__" in node:
            return arrays[f"a{node['__array__']}"]
        if "__float__" in node:
            return float(node["__float__"])
        if "__tuple__" in node:
            return tuple(build(x) for x in node["__tuple__"])
        if "__dict__" in node:
            return {key: build(x) for key, x in node["__dict__"].items()}
        if node.get("__class__") in _STORABLE:
            return _rebuilt(_STORABLE[node["__class__"]], {key: build(x) for key, x in node["fields"].items()})
        raise ValueError(f"not a cache value: unknown node {sorted(node)[:3]}")

    try:
        return build(header)
    except (KeyError, TypeError, AttributeError) as error:  # a missing array, fields that do not fit the class
        raise ValueError(f"not a cache value: {type(error).__name__}: {error}") from None


def _rebuilt(cls: type, fields: dict) -> Any:
    """``cls(**fields)`` when every field is there and has the shape its annotation asks for."""
    shapes = field_shapes(cls)
    wrong = [name for name, shape in shapes.items() if name in fields and not conforms(fields[name], shape)]
    if set(fields) - set(shapes) or wrong:
        raise ValueError(f"not a cache value: {cls.__name__} with unexpected or ill-shaped fields "
                         f"{sorted(set(fields) - set(shapes)) + wrong}")
    return cls(**fields)
