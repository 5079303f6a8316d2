"""What the sidebar selects (``ViewState``), the URL helpers for page controls, and demo mode.

Page controls (k, CCR depth, layer) are mirrored in the URL through :func:`url_int` and
:func:`remember`, so a link reproduces a view. With ``RG_DEMO=1`` (live talks): a fixed model list,
N up to 1024, uploads up to 1 MB, no free-text paths or Hub ids.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from analysis.data.corpus import Sampling
from analysis.models.builtin import BUILTIN_NAME
from analysis.runs.settings import SEED, Compute, ModelChoice
from analysis.storage.paths import allowed_roots
from dashboard.text import literal


def demo_mode() -> bool:
    """``RG_DEMO`` set (read on every run, so a test or a restart can switch it)."""
    return os.environ.get("RG_DEMO", "") not in ("", "0", "false")


def n_choices() -> tuple[int, ...]:
    return (128, 256, 512, 1024) if demo_mode() else (128, 256, 512, 1024, 2048, 4096)


def seed_limit() -> int | None:
    """The largest seed a visitor may pick (each seed is a new computation): 9 in demo mode, else none."""
    return 9 if demo_mode() else None


def upload_limit_mb() -> int:
    return 1 if demo_mode() else 50


def server_roots() -> tuple[Path, ...]:
    """The folders this server opens files in: ``streamlit run app.py -- --allowed-roots A:B``, else
    ``$RG_ALLOWED_ROOTS``, else the cache folder and ``data/`` beside it."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--allowed-roots", default="")
    known, _ = parser.parse_known_args(sys.argv[1:])
    return allowed_roots([p for p in known.allowed_roots.split(os.pathsep) if p])


@dataclass(frozen=True)
class ViewState:
    """Everything the sidebar selects; serialisable to the URL and to JSON."""

    model: str = BUILTIN_NAME
    revision: str = ""
    corpus: str = "builtin"
    n_tokens: int = Sampling.n_tokens
    seed: int = SEED
    device: str = "auto"
    tokenizer: str = ""
    source: str = ""  # how the model was chosen (a sidebar Source), so that a link restores it

    @property
    def choice(self) -> ModelChoice:
        return ModelChoice(self.model, self.revision or None, tokenizer=self.tokenizer or None)

    @property
    def sampling(self) -> Sampling:
        return Sampling(n_tokens=self.n_tokens, seed=self.seed)

    @property
    def compute(self) -> Compute:
        return Compute(device=self.device, previews=True)


def query_value(key: str, default):
    """A URL parameter converted to the default's type; the default (with a warning) if it does not convert."""
    raw = st.query_params.get(key)
    if raw is None:
        return default
    try:
        return type(default)(raw)
    except ValueError:
        st.warning(literal(f"Ignoring the URL parameter {key}={raw!r}: it must be a {type(default).__name__}."))
        return default


def url_int(key: str, default: int) -> int:
    """An integer page control's starting value from the URL."""
    return int(query_value(key, default))


def remember(**values) -> None:
    """Write page controls to the URL (defaults are written too, so links are explicit)."""
    for key, value in values.items():
        st.query_params[key] = str(value)
