"""Text corpora, tokenised into fixed windows, and the seeded sample of token positions.

Sources: the built-in corpus (the prose of Python's own help topics, ``pydoc_data.topics``, shipped
with every CPython: about 110k tokens, no download); plain-text and JSONL files (or uploaded bytes);
a Hugging Face Hub dataset (``hf:NAME[@CONFIG]:SPLIT:COLUMN``) when the Hub is reachable. A corpus is
identified by the SHA-256 of its text.

Sampling design (documented in the UI): the token stream is cut into consecutive windows of
``window`` tokens (a BOS token starts each window when the tokenizer uses one). ``ceil(N /
per_window)`` windows are drawn at random without replacement, and ``per_window`` positions at random
in each, skipping the first ``skip`` positions (attention sinks, no context yet). Fewer windows than
drawing N positions over the whole corpus keeps a first answer fast on a CPU.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from functools import cache, cached_property

import numpy as np

from analysis.errors import InputError, require
from analysis.storage.codec import storable
from analysis.storage.paths import checked_dataset_id, checked_path, datasets_cache_dir, refusal, roots_in_force

DEFAULT_MAX_MB = 256
BUILTIN_CORPUS = "builtin"


@dataclass(frozen=True)
class Corpus:
    """A text and where it came from; ``sha256`` identifies it in cache keys."""

    name: str
    text: str

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def spec(self) -> dict:
        return {"sha256": self.sha256}


@dataclass(frozen=True)
class Sampling:
    """How token positions are drawn; every field is part of the cache key."""

    n_tokens: int = 512
    window: int = 128
    skip: int = 4
    per_window: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.n_tokens >= 1, f"N (n_tokens) must be at least 1; got {self.n_tokens}.")
        require(self.window >= 2, f"window must be at least 2 tokens; got {self.window}.")
        require(0 <= self.skip < self.window,
                f"skip must be in [0, window) = [0, {self.window}); got {self.skip}.")
        require(self.per_window >= 1, f"per_window must be at least 1; got {self.per_window}.")

    @property
    def spec(self) -> dict:
        return asdict(self)


@storable
@dataclass(frozen=True)
class TokenSample:
    """Sampled positions. ``windows[rows[i], cols[i]]`` is the token of sample ``i``.

    Attributes:
        windows: ``[W, window]`` token ids of the windows that hold sampled positions.
        starts: ``[W]`` offset of each window in the corpus token stream.
        rows, cols: ``[N]`` window index and position of each sample.
    """

    windows: np.ndarray
    starts: np.ndarray
    rows: np.ndarray
    cols: np.ndarray

    @property
    def token_ids(self) -> np.ndarray:
        """``[N]`` the sampled tokens."""
        return self.windows[self.rows, self.cols]


@cache
def builtin_corpus() -> Corpus:
    """Python's help topics (``pydoc_data.topics``), in a fixed order."""
    from pydoc_data.topics import topics

    return Corpus("builtin: Python help topics", "\n\n".join(topics[k] for k in sorted(topics)))


def corpus_from_bytes(data: bytes, name: str, jsonl_field: str | None = None,
                      max_mb: float = DEFAULT_MAX_MB) -> Corpus:
    """Decode uploaded or read bytes as UTF-8 text (or JSONL, one object per line, ``jsonl_field``)."""
    size_mb = len(data) / 2**20
    require(size_mb <= max_mb, f"Text {name!r} is {size_mb:.0f} MB, over the limit of {max_mb:g} MB; "
                               "use a smaller file or raise the limit (--max-corpus-mb).")
    require(b"\x00" not in data[:65536], f"Text {name!r} looks binary (it holds NUL bytes); "
                                         "give a UTF-8 text or JSONL file.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"Text {name!r} is not UTF-8 (byte {error.start} cannot be decoded); "
                         "give a UTF-8 text or JSONL file.") from None
    if jsonl_field is not None:
        text = _jsonl_text(text, name, jsonl_field)
    require(text.strip() != "", f"Text {name!r} is empty; give a file with some prose in it.")
    return Corpus(name, text)


def _jsonl_text(text: str, name: str, field: str) -> str:
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{name!r} line {number} is not JSON ({error.msg}).") from None
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise InputError(f"{name!r} line {number} has no string field {field!r}; "
                             "set the JSONL field name (--jsonl-field).")
        documents.append(record[field])
    return "\n\n".join(documents)


def load_corpus(source: str = BUILTIN_CORPUS, jsonl_field: str = "text",
                max_mb: float = DEFAULT_MAX_MB, max_rows: int = 20000) -> Corpus:
    """Open ``builtin``, a ``.txt``/``.jsonl`` path, or ``hf:NAME[@CONFIG]:SPLIT:COLUMN``."""
    if source == BUILTIN_CORPUS:
        return builtin_corpus()
    if source.startswith("hf:"):
        return _hub_dataset(source, max_rows)
    path = checked_path(source, "Text file")
    require(path.is_file(), f"Corpus {source!r} is not a file; give a .txt or .jsonl path, "
                            f"'{BUILTIN_CORPUS}', or hf:NAME:SPLIT:COLUMN.")
    size_mb = path.stat().st_size / 2**20
    require(size_mb <= max_mb, f"Text {source!r} is {size_mb:.0f} MB, over the limit of {max_mb:g} MB; "
                               "use a smaller file or raise the limit (--max-corpus-mb).")
    field = jsonl_field if path.suffix in (".jsonl", ".ndjson") else None
    return corpus_from_bytes(path.read_bytes(), str(path), field, max_mb)


def _hub_dataset(source: str, max_rows: int) -> Corpus:
    parts = source[3:].split(":")
    require(len(parts) == 3, f"Hub dataset {source!r} must read hf:NAME[@CONFIG]:SPLIT:COLUMN, "
                             "e.g. hf:ag_news:test:text.")
    name, split, column = parts
    rows = hub_dataset_rows(source, name, split, max_rows)
    require(column in rows.column_names, f"Hub dataset {source!r} has no column {column!r}; "
                                         f"columns: {', '.join(rows.column_names)}.")
    return Corpus(source, "\n\n".join(str(t) for t in rows[column]))


def hub_dataset_rows(source: str, name: str, split: str, max_rows: int):
    """The first ``max_rows`` rows of ``split`` of the Hub dataset ``NAME[@CONFIG]`` (a ``datasets.Dataset``),
    downloaded under the project's cache. Under the dashboard's policy the name must be a Hub dataset id
    (:func:`checked_dataset_id`), is looked up on the Hub only, and may not name one of the datasets library's
    file readers (``json``, ``text``, ``csv`` ...), which would read the server's working folder."""
    import datasets
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    dataset_name, _, config = name.partition("@")
    checked_dataset_id(dataset_name, source)
    path, roots = dataset_name, roots_in_force()
    if roots is not None:
        if dataset_name in _PACKAGED_DATASETS_MODULES:
            raise refusal("Hub dataset", source, roots)
        path = "hf://datasets/" + dataset_name  # never a local folder of that name
    try:
        return datasets.load_dataset(path, config or None, split=f"{split}[:{max_rows}]",
                                     cache_dir=str(datasets_cache_dir()))
    except Exception as error:  # the datasets library raises many types; the message is what matters
        raise InputError(f"Cannot load Hub dataset {source!r}: {type(error).__name__}: {one_line(error)}") from None


def one_line(error: BaseException) -> str:
    """The first line of an exception's message, without the server's paths."""
    first = (str(error).strip().splitlines() or [""])[0]
    return re.sub(r"(?<![\w:])/[^\s'\"]+", "<path>", first)[:300]


def tokenize(tokenizer, corpus: Corpus, chunk_chars: int = 1 << 20) -> np.ndarray:
    """``[T]`` token ids of the whole corpus (no special tokens), tokenised in paragraph chunks."""
    pieces, start, text = [], 0, corpus.text
    while start < len(text):
        end = min(len(text), start + chunk_chars)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        ids = tokenizer(text[start:end], add_special_tokens=False)["input_ids"]
        pieces.append(np.asarray(ids, dtype=np.int64))
        start = end
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def bos_token(tokenizer) -> int | None:
    """The BOS id if the tokenizer puts one in front of a text by default, else None."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return None
    ids = tokenizer("a")["input_ids"]
    return bos if ids and ids[0] == bos else None


def sample_positions(token_ids: np.ndarray, sampling: Sampling, bos: int | None = None) -> TokenSample:
    """Cut ``token_ids`` into windows and draw ``sampling.n_tokens`` positions (see module docstring)."""
    body = sampling.window - (bos is not None)
    require(body >= 1, f"window {sampling.window} leaves no room for text after the BOS token.")
    n_windows = len(token_ids) // body
    room = sampling.window - sampling.skip
    capacity = n_windows * room
    require(sampling.n_tokens <= capacity,
            f"N = {sampling.n_tokens} token positions asked for, but the corpus allows at most "
            f"{capacity} ({len(token_ids)} tokens = {n_windows} windows of {sampling.window}, "
            f"{room} usable positions each); lower N or give a longer text.")
    per_window = min(room, max(sampling.per_window, math.ceil(sampling.n_tokens / n_windows)))
    n_draw = math.ceil(sampling.n_tokens / per_window)
    rng = np.random.default_rng(sampling.seed)
    chosen = np.sort(rng.choice(n_windows, size=n_draw, replace=False))
    starts = chosen * body
    windows = np.stack([token_ids[s:s + body] for s in starts])
    if bos is not None:
        windows = np.concatenate([np.full((n_draw, 1), bos, dtype=np.int64), windows], axis=1)
    cols = np.concatenate([np.sort(rng.choice(np.arange(sampling.skip, sampling.window), per_window,
                                              replace=False)) for _ in range(n_draw)])
    rows = np.repeat(np.arange(n_draw), per_window)
    return TokenSample(windows, starts, rows[:sampling.n_tokens], cols[:sampling.n_tokens])


def text_chunks(text: str, n_chunks: int, chars: int = 400) -> list[str]:
    """``n_chunks`` consecutive pieces of ``text`` of about ``chars`` characters, cut at whitespace."""
    pieces, start = [], 0
    while start < len(text) and len(pieces) < n_chunks:
        end = min(len(text), start + chars)
        cut = text.rfind(" ", start, end) if end < len(text) else end
        end = cut if cut > start else end
        piece = text[start:end].strip()
        if piece:
            pieces.append(piece)
        start = end
    return pieces
