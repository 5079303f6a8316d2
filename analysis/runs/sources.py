"""Every source a dashboard visitor can name, in one place, and what the library does with it.

A visitor controls the URL and every widget. Each entry below is one kind of source (a model, a
revision, a tokenizer folder, a text, labelled probe data, a side-by-side reference, a list of models):
the URL parameters and the free-text widgets that carry it, and the library call that opens it. Each
of those calls applies ``analysis.storage.paths``'s policy (the allowed roots, Hub ids and Hub dataset
ids), so a path outside the roots, a missing one, a link loop and a NUL byte all get the same refusal.
``tests/test_sources.py`` walks this list with such values, and checks that every URL parameter and
free-text widget of the dashboard is listed here (or in :data:`NOT_SOURCES`): a new source without a
check fails a test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analysis.data.corpus import load_corpus
from analysis.data.labelled import labelled_data
from analysis.models.refs import list_checkpoints, resolve
from analysis.runs.settings import ModelChoice


@dataclass(frozen=True)
class EntryPoint:
    """One kind of source a visitor names.

    Attributes:
        name: what it is, in words.
        url_keys: the URL parameters that carry it.
        widgets: the labels of the free-text widgets that carry it.
        forms: how a path is spelled in it (``{}`` stands for the path): a plain path, ``hf:{}:train:text``.
        open: what the library does with the value (raises InputError when refused).
    """

    name: str
    url_keys: tuple[str, ...]
    widgets: tuple[str, ...]
    forms: tuple[str, ...]
    open: Callable[[str], object]


def _reference(text: str) -> object:
    choice = ModelChoice.parse(text)
    return resolve(choice.name, choice.revision, weights=False)


def _model(text: str) -> object:
    return list_checkpoints(text), resolve(text, weights=False)


def _models(text: str) -> list:
    return [_reference(line) for line in text.splitlines() if line.strip()]


ENTRY_POINTS = (
    EntryPoint("model", ("model",), ("Hub id", "Local folder", "Checkpoint folder", "GGUF file"), ("{}",), _model),
    EntryPoint("revision", ("revision",), ("Revision (branch, tag or commit SHA)",), ("{}",),
               lambda text: resolve("EleutherAI/pythia-70m", text, weights=False)),
    EntryPoint("tokenizer folder", ("tokenizer",), ("Tokenizer folder (optional)",), ("{}",),
               lambda text: resolve("EleutherAI/pythia-70m", tokenizer=text, weights=False)),
    EntryPoint("text", ("corpus",), ("Text file (.txt or .jsonl)", "hf:NAME[@CONFIG]:SPLIT:COLUMN"),
               ("{}", "hf:{}:train:text"), load_corpus),
    EntryPoint("labelled probe data", (), ("hf:NAME[@CONFIG]:SPLIT (text and label columns)",), ("{}", "hf:{}:test"),
               labelled_data),
    EntryPoint("side-by-side reference", ("a", "b"), ("Model A", "Model B"), ("{}", "{}@main"), _reference),
    EntryPoint("models to compare", (), ("Models, one per line (a reference, optionally @revision)",), ("{}",),
               _models),
)

# URL parameters and free-text widgets that name no source: numbers and choices from fixed lists.
NOT_SOURCES = ("k", "ccr", "layer", "n_tokens", "seed", "device", "computed", "source")
