"""The shape a stored value must have before anything uses it.

A checksum tells a record was not corrupted on the way; it says nothing about whether the record
holds what its reader expects (a list where a dataclass was written, a string, a tree thousands of
levels deep). Readers of the cache and of the result store name the shape they expect, and a record
that does not conform is set aside like a corrupt one. Shapes:

- a type, a union of types (``int | None``) or ``None``: ``isinstance`` (a float also takes an int);
- a tuple of shapes: a tuple of that length, item by item;
- a one-item list ``[shape]``: a list whose every item has that shape;
- a dict ``{key: shape}``: a dict with at least those keys, each of that shape (other keys allowed);
- a dataclass registered for storage: an instance whose fields match its annotations (checked when
  the value is rebuilt, see ``analysis.storage.codec``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

import numpy as np

MAX_DEPTH = 48  # deeper JSON than any record the project writes (about 8 levels) is refused unread


class OneOf(tuple):
    """Any one of several shapes (from an annotation such as ``Histogram | None``)."""


def conforms(value: Any, shape: Any) -> bool:
    """Whether ``value`` has ``shape`` (see the module docstring)."""
    if isinstance(shape, OneOf):
        return any(conforms(value, member) for member in shape)
    if shape is None:
        return value is None
    if shape is Any:
        return True
    if isinstance(shape, tuple):
        return isinstance(value, tuple) and len(value) == len(shape) and all(map(conforms, value, shape))
    if isinstance(shape, list):
        return isinstance(value, list) and all(conforms(item, shape[0]) for item in value)
    if isinstance(shape, dict):
        return isinstance(value, dict) and all(key in value and conforms(value[key], inner)
                                               for key, inner in shape.items())
    if shape is float:
        return isinstance(value, int | float | np.floating | np.integer) and not isinstance(value, bool)
    return isinstance(value, shape)


def from_hint(hint: Any) -> Any:
    """The shape a field annotation asks for: ``int | None`` -> one of int and None, ``tuple[float, float]``
    -> ``(float, float)``, ``list[str]`` -> ``[str]``, ``dict[...]`` -> dict, a class as it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return OneOf(from_hint(arg) for arg in args)
    if origin is tuple:
        return tuple if not args or args[-1] is Ellipsis else tuple(from_hint(a) for a in args)
    if origin is list:
        return [from_hint(args[0])] if args else list
    if origin is dict:
        return dict
    return None if hint is type(None) else hint


@functools.cache
def field_shapes(cls: type) -> dict[str, Any]:
    """Each field of the dataclass ``cls`` and the shape its annotation asks for."""
    hints = typing.get_type_hints(cls)
    return {field.name: from_hint(hints[field.name]) for field in dataclasses.fields(cls)}


def record_shape(cls: type) -> dict[str, Any]:
    """The shape of a dataclass written as plain JSON (arrays and tuples as lists): its fields' shapes with
    ``np.ndarray`` and tuples read as lists."""
    def plain(shape: Any) -> Any:
        if isinstance(shape, OneOf):
            return OneOf(plain(member) for member in shape)
        if shape is np.ndarray or shape is tuple or isinstance(shape, tuple):
            return list
        return shape

    return {name: plain(shape) for name, shape in field_shapes(cls).items()}


def depth(node: Any) -> int:
    """How deeply ``node`` (parsed JSON) nests, counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    return deepest
