"""Cached entry points into ``analysis`` for the pages, and the one place errors become messages."""

from __future__ import annotations

import contextlib
import gc

import streamlit as st
import torch

from analysis.errors import InputError
from analysis.loading import LoadedModel, load
from analysis.model_info import describe
from analysis.refs import ModelRef, list_checkpoints, resolve


@st.cache_data(show_spinner=False, ttl=600)
def checkpoints(model: str):
    return list_checkpoints(model)


@st.cache_data(show_spinner="Resolving the model reference ...", ttl=600)
def resolved(model: str, revision: str) -> ModelRef:
    return resolve(model, revision or None)


@st.cache_data(show_spinner=False)
def card(ref: ModelRef) -> dict:
    return describe(ref)


@st.cache_resource(max_entries=1, show_spinner=False)
def _resident(identity: str, _ref: ModelRef, device: str) -> LoadedModel:
    """One model resident at a time: a new identity evicts (releases) the previous one."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    with st.status(f"Loading {_ref.label} ...", expanded=False) as status:
        bar = st.progress(0.0)
        loaded = load(_ref, device=device, progress=lambda stage, d, t: bar.progress(d / max(t, 1), stage))
        status.update(label=f"Loaded {_ref.label}", state="complete")
    return loaded


def loaded_model(ref: ModelRef, device: str) -> LoadedModel:
    return _resident(ref.identity, ref, device)


@contextlib.contextmanager
def friendly_errors():
    """Show InputError and out-of-memory as readable messages, never as a traceback."""
    try:
        yield
    except InputError as error:
        st.error(str(error))
        st.stop()
    except torch.OutOfMemoryError:
        st.error("Out of memory: lower N, choose a smaller model, or switch the device to cpu.")
        st.stop()
