"""Labelled texts for the linear probes.

Built-in tasks (no download):

- *topics*: which of four Python help topics (``specialnames``, ``compound``, ``formatstrings``,
  ``debugger`` from ``pydoc_data.topics``) a ~400-character passage comes from. The topics differ in
  their words, so even the embedding layer probes near 1.0: it says little about where layers differ.
- *word order*: is a ~160-character passage in its own word order or shuffled? Both classes hold the
  same words (every passage is written as its words joined by single spaces, after a leading space, so
  a tokenizer splits both versions into the same tokens), so mean-pooled embeddings cannot tell them
  apart: the embedding layer sits at chance by construction, and only layers that mix context can
  separate the classes.

Also: a CSV or JSONL file with ``text`` and ``label`` columns, or a Hub dataset such as ``ag_news``
(``hf:ag_news:test``, its first 2000 rows) when the Hub is reachable.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pydoc_data.topics import topics

import numpy as np

from analysis.data.corpus import builtin_corpus, hub_dataset_rows, text_chunks
from analysis.errors import InputError, require
from analysis.storage.paths import checked_path

BUILTIN_TOPICS = ("specialnames", "compound", "formatstrings", "debugger")


@dataclass(frozen=True)
class Labelled:
    texts: list[str]
    labels: list[str]
    name: str

    @property
    def digest(self) -> str:
        """sha256 of the texts and labels: what a result on this data depends on."""
        return hashlib.sha256("\x00".join([*self.texts, "\x01", *self.labels]).encode()).hexdigest()


def builtin_task(per_topic: int = 60) -> Labelled:
    """Passages of four Python help topics, labelled by topic."""
    texts, labels = [], []
    for topic in BUILTIN_TOPICS:
        for piece in text_chunks(topics[topic], per_topic):
            texts.append(piece)
            labels.append(topic)
    return Labelled(texts, labels, "builtin: four Python help topics")


def word_order_task(n_passages: int = 240, seed: int = 0) -> Labelled:
    """Passages of the built-in text, half with their words shuffled (seeded), labelled ``original`` or
    ``shuffled``; each written as ``" " + " ".join(words)`` so that both versions tokenise to the same tokens."""
    rng = np.random.default_rng(seed)
    passages = [piece.split() for piece in text_chunks(builtin_corpus().text, n_passages, chars=160)]
    shuffled = set(rng.permutation(len(passages))[: len(passages) // 2].tolist())
    texts, labels = [], []
    for index, words in enumerate(passages):
        order = rng.permutation(len(words)) if index in shuffled else np.arange(len(words))
        texts.append(" " + " ".join(words[i] for i in order))
        labels.append("shuffled" if index in shuffled else "original")
    return Labelled(texts, labels, "builtin: original or shuffled word order")


def labelled_from_bytes(data: bytes, name: str) -> Labelled:
    """CSV (header with ``text`` and ``label``) or JSONL (objects with ``text`` and ``label``)."""
    require(b"\x00" not in data[:65536], f"{name!r} looks binary; give a CSV or JSONL file.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{name!r} is not UTF-8 text.") from None
    if name.endswith((".jsonl", ".ndjson")):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise InputError(f"{name!r} line {number} is not JSON ({error.msg}).") from None
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
    return check_labelled(Labelled([str(r.get("text") or "") for r in rows],
                                   ["" if r.get("label") is None else str(r.get("label")) for r in rows], name))


def labelled_from_hub(source: str, max_rows: int = 2000) -> Labelled:
    """``hf:NAME[@CONFIG]:SPLIT`` with ``text`` and ``label`` columns (e.g. ``hf:ag_news:test``), first rows."""
    parts = source[3:].split(":")
    require(source.startswith("hf:") and len(parts) == 2, f"Hub data {source!r} must read hf:NAME[@CONFIG]:SPLIT.")
    name, split = parts
    rows = hub_dataset_rows(source, name, split, max_rows)
    require({"text", "label"} <= set(rows.column_names),
            f"Hub dataset {source!r} needs 'text' and 'label' columns; it has {', '.join(rows.column_names)}.")
    return check_labelled(Labelled([str(t) for t in rows["text"]], [str(y) for y in rows["label"]], source))


def check_labelled(data: Labelled) -> Labelled:
    """InputError for missing texts or labels, a single class, or more classes than rows allow."""
    require(len(data.texts) >= 4, f"{data.name!r} has {len(data.texts)} rows; a probe needs at least 4.")
    missing = [i + 1 for i, (t, y) in enumerate(zip(data.texts, data.labels, strict=True))
               if not t.strip() or not y.strip()]
    require(not missing, f"{data.name!r}: rows {missing[:10]} miss a text or a label (columns 'text', 'label').")
    classes = sorted(set(data.labels))
    require(len(classes) >= 2, f"{data.name!r} has one class ({classes[0]!r}); a probe needs two or more.")
    counts = {c: data.labels.count(c) for c in classes}
    require(min(counts.values()) >= 2, f"{data.name!r}: every class needs at least two rows (one to train, one "
                                       f"to test); too few: {[c for c, n in counts.items() if n < 2][:10]}.")
    return data


def labelled_data(source: str) -> Labelled:
    """``builtin`` (topics), ``builtin:word-order``, a ``.csv`` / ``.jsonl`` file, or ``hf:NAME[@CONFIG]:SPLIT``."""
    if source == "builtin":
        return builtin_task()
    if source == "builtin:word-order":
        return word_order_task()
    if source.startswith("hf:"):
        return labelled_from_hub(source)
    path = checked_path(source, "Labelled data")
    require(path.is_file(), f"Labelled data {source!r} is not a file; give builtin, a .csv or .jsonl file, or "
                            "hf:NAME:SPLIT.")
    return labelled_from_bytes(path.read_bytes(), path.name)
