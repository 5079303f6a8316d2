"""The pages' only way into ``analysis``: cached calls with progress shown, errors made readable.

Caching: the loaded model is a ``st.cache_resource`` with one entry (a new model releases the old);
hidden states, readout bases and every metric come from the disk cache (``analysis.storage.cache``), so a
second visitor, a second tab or a restarted app reads them instead of recomputing.
"""

from __future__ import annotations

import contextlib
import gc

import streamlit as st
import torch

from analysis.activations.hidden import HiddenStates
from analysis.capacity.formulas import capacity_report
from analysis.data.corpus import Corpus, Sampling, builtin_corpus, load_corpus
from analysis.errors import InputError
from analysis.geometry.pga import LayerPGA, PGASettings
from analysis.models.card import describe
from analysis.models.loading import LoadedModel, load
from analysis.models.refs import ModelRef, list_checkpoints, resolve
from analysis.runs.pipeline import (
    MatrixGeometry,
    cached_pga,
    embedding_unembedding_cosines,
    matrix_geometry,
    matrix_stats,
    model_readout,
    model_states,
)
from dashboard.state import ViewState, remember, url_int


@st.cache_data(show_spinner=False, ttl=600)
def checkpoints(model: str):
    return list_checkpoints(model)


@st.cache_data(show_spinner=False, ttl=600)
def resolved(model: str, revision: str) -> ModelRef:
    with st.spinner(f"Resolving {model} ..."):
        return resolve(model, revision or None)


@st.cache_data(show_spinner=False)
def card(ref: ModelRef) -> dict:
    return describe(ref)


class _Bar:
    """A ``Progress`` callback that drives one Streamlit progress bar, naming the step; as a context
    manager it removes the bar on the way out, whatever happened."""

    def __init__(self, label: str):
        self.bar = st.progress(0.0, text=label)

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.bar.progress(min(done / max(total, 1), 1.0), text=f"{stage}: {done}/{total}")

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *_exc) -> None:
        self.bar.empty()


@st.cache_resource(max_entries=1, show_spinner=False)
def _resident(identity: str, device: str, _ref: ModelRef) -> LoadedModel:
    """One model resident at a time: a new (identity, device) evicts and frees the previous one.

    The progress bar is created inside (Streamlit replays a cached function's own elements only)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    with _Bar(f"Loading {_ref.label}") as bar:
        return load(_ref, device=device, progress=bar)


def loaded_model(view: ViewState) -> LoadedModel:
    ref = resolved(view.model, view.revision)
    return _resident(ref.identity, view.device, ref)


def corpus(view: ViewState) -> Corpus:
    """The text the sidebar chose (an upload lives in the session)."""
    if view.corpus == "builtin":
        return builtin_corpus()
    if view.corpus.startswith("upload:"):
        uploaded = st.session_state.get("uploads", {}).get(view.corpus)
        if uploaded is None:
            raise InputError("The uploaded text is not in this session any more: upload it again.")
        return uploaded
    return load_corpus(view.corpus)


def sampling(view: ViewState) -> Sampling:
    return Sampling(n_tokens=view.n_tokens, seed=view.seed)


@st.cache_resource(max_entries=2, show_spinner=False)
def _states(key: str, _view: ViewState, _loaded: LoadedModel):
    with _Bar("Hidden states") as bar:
        return model_states(_loaded, corpus(_view), sampling(_view), progress=bar)


def states(view: ViewState, loaded: LoadedModel) -> tuple[HiddenStates, dict]:
    """(hidden states of every layer, their provenance): disk-cached, kept in memory for the view."""
    key = f"{loaded.spec}|{view.corpus}|{corpus(view).sha256}|{sampling(view).spec}"
    return _states(key, view, loaded)


def pga(view: ViewState, loaded: LoadedModel, k: int, ccr: int, layers: list[int] | None = None,
        n_null: int = 100) -> list[LayerPGA]:
    """PGA at (k, ccr) for the given layers (all by default); each layer cached on disk."""
    hidden, provenance = states(view, loaded)
    layers = list(range(hidden.n_layers)) if layers is None else layers
    settings = PGASettings(ks=(k,), ccrs=(ccr,), n_null=n_null, seed=view.seed)
    with _Bar(f"PGA at k = {k}, CCR-{ccr}") as bar:
        return cached_pga(hidden, provenance["spec"], model_readout(loaded), loaded.spec, settings, layers,
                          view.device, bar)


def readout(loaded: LoadedModel):
    """The readout basis and the singular values of W_U (disk-cached per model)."""
    return model_readout(loaded)


def geometry(view: ViewState, which: str, sample_pairs: int | None = None) -> MatrixGeometry:
    ref = resolved(view.model, view.revision)
    with _Bar(f"Cosine histogram of the {which}") as bar:
        return matrix_geometry(ref, which, sample_pairs=sample_pairs, device=view.device, progress=bar)


def stats(view: ViewState, which: str = "embedding"):
    """(closed-form cosine statistics, tied) of the chosen model's W_E or W_U."""
    return matrix_stats(resolved(view.model, view.revision), which, view.device)


def paired(view: ViewState):
    return embedding_unembedding_cosines(resolved(view.model, view.revision))


def capacity(d: int, eps: float, delta: float = 0.005):
    """The capacity report at the model's epsilon, clipped into the formulas' domain (0, 1]."""
    return capacity_report(d, min(max(eps, 1e-6), 1.0), delta)


@contextlib.contextmanager
def friendly_errors():
    """Show InputError and out-of-memory as readable messages, never as a traceback."""
    try:
        yield
    except InputError as error:
        st.error(str(error), icon=":material/error:")
        st.stop()
    except torch.OutOfMemoryError:
        st.error("Out of memory: lower N (sidebar), choose a smaller model, or switch the device to cpu.",
                 icon=":material/memory:")
        st.stop()
    except MemoryError:
        st.error("The machine ran out of memory: lower N or choose a smaller model.", icon=":material/memory:")
        st.stop()


def series(view: ViewState, model: str, revisions: list[str], k: int, ccr: int):
    """Per-checkpoint metrics and loss (each checkpoint cached on disk; a rerun resumes)."""
    from analysis.runs.series import training_sweep

    with _Bar("Checkpoints") as bar:
        return training_sweep(model, revisions, corpus(view), sampling(view),
                              PGASettings(ks=(k,), ccrs=(ccr,), seed=view.seed), view.device, bar)


@st.cache_data(show_spinner="Reading the sweep results ...", ttl=60)
def stored(store_url: str) -> list:
    """Every model x settings series a sweep left in the result store (re-read each minute)."""
    from analysis.runs.series import stored_series
    from analysis.storage.store import ResultStore

    return stored_series(ResultStore(store_url))


def sweep_source() -> list | None:
    """The stored sweep series when the page should show them (the default when the store has any);
    None to compute on this machine."""
    from analysis.storage.store import default_store_url

    url = default_store_url()
    with friendly_errors():
        found = stored(url)
    if not found:
        return None
    options = ["Sweep results", "Compute on this machine"]
    choice = st.radio("Source", options, horizontal=True, index=min(max(url_int("computed", 0), 0), 1),
                      help=f"Sweep results: {len(found)} model x settings series in {url} (RG_STORE), read "
                           "without loading any model. Compute: the sidebar's model, on this machine.")
    remember(computed=options.index(choice))
    return found if choice == options[0] else None


def train_demo_series() -> dict:
    """Train the offline demo series into the cache folder (about two minutes on a laptop CPU)."""
    from analysis.models.train_demo import train_demo
    from analysis.storage.paths import cache_dir

    with _Bar("Training the demo series") as bar:
        return train_demo(cache_dir() / "train-demo", progress=bar)


def pooled(loaded: LoadedModel, texts: list[str]):
    from analysis.runs.pipeline import model_pooled

    with _Bar("Pooling the texts") as bar:
        return model_pooled(loaded, texts, progress=bar)


def pooled_of(view: ViewState, model: str, texts: list[str]):
    """(pooled states, readout basis) of another model, loaded for the call and released."""
    from analysis.runs.pipeline import model_pooled

    loaded = load(resolve(model), device=view.device)
    try:
        return model_pooled(loaded, texts), model_readout(loaded)
    finally:
        del loaded
        gc.collect()


@st.cache_data(show_spinner="Computing the token map (UMAP) ...", max_entries=8)
def token_map(key: str, _states, _readout_k, ccr: int, seed: int):
    from analysis.geometry.token_map import token_map as compute_map

    return compute_map(_states, _readout_k, ccr, seed)
