"""The sidebar: which model, checkpoint, corpus and device; mirrored in the URL query string."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import streamlit as st

from analysis.builtin import BUILTIN_NAME
from analysis.refs import KNOWN_MODELS

SOURCES = ("Built-in default", "Known Hub model", "Hub id", "Local folder", "Checkpoint folder", "GGUF file")
DEMO_MODE = os.environ.get("RG_DEMO", "") not in ("", "0", "false")


@dataclass(frozen=True)
class ViewState:
    """Everything that selects what the pages compute; serialisable to the URL and to JSON."""

    model: str = BUILTIN_NAME
    revision: str = ""
    corpus: str = "builtin"
    n_tokens: int = 512
    seed: int = 0
    device: str = "auto"

    def as_query(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items() if v != getattr(ViewState, k)}


def _from_query() -> ViewState:
    query, defaults = st.query_params, ViewState()
    values = {}
    for key, default in asdict(defaults).items():
        raw = query.get(key)
        if raw is None:
            continue
        try:
            values[key] = type(default)(raw)
        except ValueError:
            st.warning(f"Ignoring URL parameter {key}={raw!r}: not a {type(default).__name__}.")
    return ViewState(**{**asdict(defaults), **values})


def sidebar() -> ViewState:
    """Draw the shared sidebar and return the chosen state (also written back to the URL)."""
    start = _from_query()
    st.sidebar.header("Model")
    source_index = 0 if start.model == BUILTIN_NAME else (1 if start.model in KNOWN_MODELS else 2)
    sources = SOURCES[:2] if DEMO_MODE else SOURCES
    source = st.sidebar.selectbox("Source", sources, index=min(source_index, len(sources) - 1))
    if source == "Built-in default":
        model = BUILTIN_NAME
        st.sidebar.caption("SmolLM2-135M-Instruct (GGUF Q4_1, from PyPI; works offline)")
    elif source == "Known Hub model":
        index = KNOWN_MODELS.index(start.model) if start.model in KNOWN_MODELS else 0
        model = st.sidebar.selectbox("Hub model", KNOWN_MODELS, index=index)
    else:
        hint = {"Hub id": "owner/name", "Local folder": "/path/to/save_pretrained/folder",
                "Checkpoint folder": "/path/to/run (checkpoint-<step>/ inside)",
                "GGUF file": "/path/to/model.gguf"}[source]
        given = start.model if start.model != BUILTIN_NAME else ""
        model = st.sidebar.text_input(source, value=given, placeholder=hint).strip() or BUILTIN_NAME
    revision = ""
    if source in ("Known Hub model", "Hub id", "Checkpoint folder"):
        revision = _checkpoint_picker(model, start.revision)
    st.sidebar.header("Text")
    corpus = "builtin"
    n_tokens = st.sidebar.select_slider("N token positions", [128, 256, 512, 1024, 2048],
                                        value=start.n_tokens if start.n_tokens in (128, 256, 512, 1024, 2048)
                                        else 512)
    seed = int(st.sidebar.number_input("Seed", value=start.seed, step=1))
    device = st.sidebar.selectbox("Device", ["auto", "cpu", "cuda"], index=["auto", "cpu", "cuda"].index(
        start.device) if start.device in ("auto", "cpu", "cuda") else 0)
    state = ViewState(model, revision, corpus, int(n_tokens), seed, device)
    st.query_params.from_dict(state.as_query())
    return state


def _checkpoint_picker(model: str, current: str) -> str:
    from dashboard.compute import checkpoints

    steps = checkpoints(model)
    if not steps:
        return st.sidebar.text_input("Revision (branch, tag or SHA)", value=current).strip()
    labels = [c.revision for c in steps]
    index = labels.index(current) if current in labels else len(labels) - 1
    return st.sidebar.select_slider("Checkpoint", labels, value=labels[index])
