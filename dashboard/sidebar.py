"""The shared sidebar (model, checkpoint, text, N, seed, device), mirrored in the URL query string."""

from __future__ import annotations

from dataclasses import asdict, replace

import streamlit as st

from analysis.data.corpus import corpus_from_bytes
from analysis.errors import InputError
from analysis.models.builtin import BUILTIN_NAME
from analysis.models.refs import KNOWN_MODELS
from analysis.storage.paths import restrict_to
from dashboard.compute import checkpoints, page_started
from dashboard.routing import route_through_app
from dashboard.text import literal
from dashboard.view import ViewState, demo_mode, n_choices, query_value, seed_limit, server_roots, upload_limit_mb

SOURCES = ("Built-in default", "Known Hub model", "Hub id", "Local folder", "Checkpoint folder", "GGUF file")
DEVICES = ("auto", "cpu", "cuda")


def _source_of(model: str) -> str:
    if model == BUILTIN_NAME:
        return SOURCES[0]
    if model in KNOWN_MODELS:
        return SOURCES[1]
    if model.endswith(".gguf"):
        return "GGUF file"
    return "Local folder" if model.startswith(("/", ".", "~")) else "Hub id"


def _model_picker(start: ViewState) -> tuple[str, str, str]:
    sources = SOURCES[:2] if demo_mode() else SOURCES
    wanted = start.source if start.source in sources else _source_of(start.model)
    source = st.sidebar.selectbox("Source", sources, index=sources.index(wanted) if wanted in sources else 0)
    if source == "Built-in default":
        st.sidebar.caption("SmolLM2-135M-Instruct (GGUF Q4_1 from PyPI; works offline)")
        return BUILTIN_NAME, "", source
    if source == "Known Hub model":
        index = KNOWN_MODELS.index(start.model) if start.model in KNOWN_MODELS else 0
        model = st.sidebar.selectbox("Hub model", KNOWN_MODELS, index=index)
    else:
        hint = {"Hub id": "owner/name", "Local folder": "/path/to/save_pretrained/folder",
                "Checkpoint folder": "/path/to/run  (checkpoint-<step>/ or step<N>/ inside)",
                "GGUF file": "/path/to/model.gguf"}[source]
        given = start.model if wanted == source or source == "Checkpoint folder" else ""
        model = st.sidebar.text_input(source, value=given if given != BUILTIN_NAME else "", placeholder=hint,
                                      help=None if source == "Hub id" else roots_help())
        model = model.strip()
        if not model:
            st.sidebar.info(f"Enter a {source.lower()} to analyse it.")
            return BUILTIN_NAME, "", source
    revision = ""
    if source in ("Known Hub model", "Hub id", "Checkpoint folder"):
        revision = _checkpoint_picker(model, start.revision)
    return model, revision, source


def roots_help() -> str:
    return "This server opens files only under " + ", ".join(map(str, server_roots())) + "."


def _checkpoint_picker(model: str, current: str) -> str:
    try:
        steps = checkpoints(model)
    except InputError as error:
        st.sidebar.error(literal(error))
        return current
    if not steps:
        return st.sidebar.text_input("Revision (branch, tag or commit SHA)", value=current).strip()
    labels = [c.revision for c in steps]
    if current and current not in labels:
        st.sidebar.warning(literal(f"Checkpoint {current!r} is not in this model's list; showing the last one."))
    index = labels.index(current) if current in labels else len(labels) - 1
    return st.sidebar.select_slider("Checkpoint", labels, value=labels[index])


def _corpus_picker(start: str) -> str:
    options = ["Built-in (Python help topics)", "Upload a .txt or .jsonl"]
    if not demo_mode():
        options += ["File path", "Hub dataset"]
    if start == "builtin":
        index = 0
    elif start.startswith("upload:") or demo_mode():
        index = 1
    else:
        index = 3 if start.startswith("hf:") else 2
    choice = st.sidebar.selectbox("Text", options, index=index)
    if choice == options[0]:
        return "builtin"
    if choice == "File path":
        return st.sidebar.text_input("Text file (.txt or .jsonl)", value="" if start == "builtin" else start,
                                     help=roots_help()) or "builtin"
    if choice == "Hub dataset":
        return st.sidebar.text_input("hf:NAME[@CONFIG]:SPLIT:COLUMN", value=start if start.startswith("hf:") else
                                     "hf:ag_news:test:text")
    upload = st.sidebar.file_uploader(f"Text (up to {upload_limit_mb()} MB)", type=["txt", "jsonl"])
    if upload is None:
        return start if start.startswith("upload:") else "builtin"
    try:
        text = corpus_from_bytes(upload.getvalue(), upload.name,
                                 "text" if upload.name.endswith(".jsonl") else None, upload_limit_mb())
    except InputError as error:
        st.sidebar.error(literal(error))
        return "builtin"
    key = f"upload:{text.sha256[:12]}"
    st.session_state.setdefault("uploads", {})[key] = text
    return key


def sidebar() -> ViewState:
    """Draw the shared sidebar and return the chosen state (also written back to the URL)."""
    page_started()
    route_through_app()
    restrict_to(server_roots())
    defaults = ViewState()
    start = ViewState(**{k: query_value(k, v) for k, v in asdict(defaults).items()})
    if demo_mode() and start.model not in (BUILTIN_NAME, *KNOWN_MODELS):
        start = replace(start, model=BUILTIN_NAME, revision="")
    if demo_mode() and not start.corpus.startswith(("builtin", "upload:")):
        start = replace(start, corpus="builtin")
    if demo_mode():
        start = replace(start, tokenizer="")
    st.sidebar.header("Model")
    model, revision, source = _model_picker(start)
    tokenizer = ""
    if not demo_mode() and _source_of(model) == "Local folder":
        tokenizer = st.sidebar.text_input("Tokenizer folder (optional)", value=start.tokenizer,
                                          help="For checkpoints saved without tokenizer files (the run's folder is "
                                               "tried first). " + roots_help()).strip()
    st.sidebar.header("Text")
    corpus = _corpus_picker(start.corpus)
    choices = n_choices()
    n_start = start.n_tokens if start.n_tokens in choices else 512
    n_tokens = st.sidebar.select_slider("N token positions", choices, value=n_start,
                                        help="z grows roughly like sqrt(N): compare z at equal N.")
    top = seed_limit()
    seed_start = max(start.seed, 0) if top is None else min(max(start.seed, 0), top)
    seed = int(st.sidebar.number_input("Seed", min_value=0, max_value=top, value=seed_start, step=1,
                                       help="token sample and null draws"))
    device = st.sidebar.selectbox("Device", DEVICES, index=DEVICES.index(start.device)
                                  if start.device in DEVICES else 0)
    state = ViewState(model, revision, corpus, int(n_tokens), seed, device, tokenizer,
                      "" if source == _source_of(model) else source)
    for key, value in asdict(state).items():
        if value != getattr(defaults, key):
            st.query_params[key] = str(value)
        elif key in st.query_params:
            del st.query_params[key]
    if demo_mode():
        st.sidebar.caption(f"Demo mode: fixed models, N <= 1024, uploads <= 1 MB, seeds 0-{top}, one computation at "
                           "a time, no training.")
    return state
