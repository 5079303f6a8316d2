"""The pages' only way into ``analysis``: the library's door (``analysis.runs.analyses``) with
progress bars shown and errors made readable.

Caching: the loaded model is a ``st.cache_resource`` with one entry (a new model releases the old);
the hidden states of the current view stay in memory; everything else comes from the disk cache
(``analysis.storage.cache``), so a second visitor, a second tab or a restarted app reads it instead
of recomputing.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable

import streamlit as st
import torch
from streamlit.runtime.scriptrunner import get_script_run_ctx

from analysis.capacity.atlas import Measured
from analysis.data.corpus import Corpus, builtin_corpus, load_corpus
from analysis.data.labelled import Labelled
from analysis.errors import InputError
from analysis.geometry.readout import ReadoutBasis
from analysis.models import at_hand
from analysis.models.card import describe
from analysis.models.loading import LoadedModel, load
from analysis.models.refs import ModelRef, list_checkpoints, resolve
from analysis.models.train_demo import train_demo
from analysis.results.collections import (
    CapacityRun,
    CheckpointSeries,
    ConvergenceRun,
    PGARun,
    ProbeRun,
    TokenMapRun,
    TriageRun,
)
from analysis.runs import analyses
from analysis.runs.series import free_memory, stored_series
from analysis.runs.settings import ModelChoice, needs_preview, pga_settings, preview_settings
from analysis.storage.cache import Entry, on_recomputed
from analysis.storage.paths import cache_dir, restrict_to, roots_in_force
from analysis.storage.store import ResultStore
from dashboard.text import literal
from dashboard.view import ViewState, demo_mode


def _note_in_page(message: str) -> None:
    """A rebuilt cache entry is a note in the page of the visitor whose run met it."""
    if get_script_run_ctx() is not None:
        st.info(literal(message), icon=":material/autorenew:")


on_recomputed(_note_in_page)


@st.cache_data(show_spinner=False, ttl=600)
def checkpoints(model: str):
    return list_checkpoints(model)


@st.cache_data(show_spinner=False, ttl=600)
def resolved(model: str, revision: str, tokenizer: str = "") -> ModelRef:
    with st.spinner(literal(f"Resolving {model} ...")):
        return resolve(model, revision or None, tokenizer=tokenizer or None)


def view_ref(view: ViewState) -> ModelRef:
    """The sidebar's model, resolved (revision -> commit SHA or content hash)."""
    return resolved(view.model, view.revision, view.tokenizer)


@st.cache_data(show_spinner=False)
def card(ref: ModelRef) -> dict:
    return describe(ref)


@st.cache_resource
def _one_at_a_time() -> threading.RLock:
    """The server's one computation slot in demo mode (re-entrant: a computation may nest another)."""
    return threading.RLock()


@contextlib.contextmanager
def computation_slot():
    """In demo mode, hold the server's one computation slot (for work done off the page, without a bar)."""
    if not demo_mode():
        yield
        return
    with _one_at_a_time():
        yield


class Bar:
    """A ``Progress`` callback that drives one Streamlit progress bar, naming the step; as a context
    manager it removes the bar on the way out, whatever happened. In demo mode it holds the server's
    one computation slot meanwhile, and says so while it waits for it."""

    def __init__(self, label: str):
        self.shown, self.touched = (0.0, literal(label)), time.monotonic()
        self.bar = st.progress(*self.shown)
        self.slot = _one_at_a_time() if demo_mode() else None

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.shown = (min(done / max(total, 1), 1.0), literal(f"{stage}: {done}/{total}"))
        self.bar.progress(*self.shown)

    def touch(self) -> None:
        """Send the bar again as it is, at most every quarter second: a point where Streamlit stops a run that
        a newer move superseded."""
        if time.monotonic() - self.touched > 0.25:
            self.touched = time.monotonic()
            self.bar.progress(*self.shown)

    def __enter__(self) -> Bar:
        if self.slot is not None and not self.slot.acquire(blocking=False):
            self.bar.progress(0.0, text="Waiting: another visitor's computation is running (demo mode runs one "
                                        "at a time) ...")
            self.slot.acquire()
        return self

    def __exit__(self, *_exc) -> None:
        if self.slot is not None:
            self.slot.release()
        self.bar.empty()


@st.cache_resource(max_entries=1, show_spinner=False)
def _resident(identity: str, device: str, _ref: ModelRef) -> LoadedModel:
    """One model resident at a time: a new (identity, device) evicts and frees the previous one.

    The progress bar is created inside (Streamlit replays a cached function's own elements only)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    with Bar(f"Loading {_ref.label}") as bar:
        return load(_ref, device=device, progress=bar)


def loaded_model(view: ViewState) -> LoadedModel:
    ref = view_ref(view)
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


@st.cache_resource(max_entries=2, show_spinner=False)
def _states(key: str, _view: ViewState, _loaded: LoadedModel) -> Entry:
    with Bar("Hidden states") as bar:
        return analyses.model_hidden_states(_loaded, corpus(_view), _view.sampling, _view.compute, bar)


def states(view: ViewState, loaded: LoadedModel) -> Entry:
    """The cache entry of the view's hidden states (every layer), kept in memory for the view."""
    key = f"{loaded.spec}|{view.corpus}|{corpus(view).sha256}|{view.sampling.spec}"
    return _states(key, view, loaded)


class Gate:
    """One heavy computation at a time in this server process (two tabs do not fight for two cores).

    Requests go by priority: a visitor's preview, then a visitor's exact run, then background fill. The
    holder of long work steps aside at each ``pause`` (handed out by :meth:`hold`; the PGA engine calls it
    between layers and every few subspaces) while a more urgent request waits, then carries on where it
    was: a preview waits for a few subspaces of other work at most. While a visitor's page is being drawn
    (:meth:`quiet`), exact and background work step aside too, so that the page and the browser drawing it
    have the cores."""

    PREVIEW, EXACT, FILL = 0, 1, 2

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.busy = False
        self.waiting = [0, 0, 0]  # requests waiting, by priority
        self.quiet_until = 0.0  # time.monotonic() until which only previews run

    def _quiet_left(self, priority: int) -> float:
        return 0.0 if priority == self.PREVIEW else max(0.0, self.quiet_until - time.monotonic())

    def _take(self, priority: int) -> None:
        with self.condition:
            self.waiting[priority] += 1
            try:
                while self.busy or any(self.waiting[:priority]) or self._quiet_left(priority):
                    self.condition.wait(timeout=self._quiet_left(priority) or None)
            finally:
                self.waiting[priority] -= 1
            self.busy = True

    def _give_back(self) -> None:
        with self.condition:
            self.busy = False
            self.condition.notify_all()

    def _pause(self, priority: int) -> None:
        with self.condition:
            urgent = any(self.waiting[:priority]) or self._quiet_left(priority)
        if urgent:
            self._give_back()
            self._take(priority)

    @contextlib.contextmanager
    def hold(self, priority: int):
        """Hold the gate at ``priority``; the value is the holder's ``pause()``."""
        self._take(priority)
        try:
            yield lambda: self._pause(priority)
        finally:
            self._give_back()

    def quiet(self, seconds: float) -> None:
        """Only previews run for the next ``seconds`` (from now: a later call shortens or extends it)."""
        with self.condition:
            self.quiet_until = time.monotonic() + seconds
            self.condition.notify_all()


@st.cache_resource
def gate() -> Gate:
    return Gate()


DRAWING_SECONDS = 10.0  # a page run starting: exact and background work wait until it is drawn, this long at most
RENDERING_SECONDS = 1.0  # a page drawn: they wait while the browser renders it (~0.3-0.9 s in chromium, 2 cores)


def page_started() -> None:
    """A visitor's page run began (the sidebar calls this): the page gets the cores until it is drawn."""
    gate().quiet(DRAWING_SECONDS)


def page_drawn() -> None:
    """The visible part of the page is drawn; exact and background work start once the browser has drawn it."""
    gate().quiet(RENDERING_SECONDS)


def _slot(priority: int, bar: Bar | None = None):
    """The gate at ``priority`` as the library's ``slot``; its pause also re-sends ``bar`` (a Streamlit call,
    where a run superseded by a newer move is stopped at once instead of at the end of its layer)."""
    @contextlib.contextmanager
    def slot():
        with gate().hold(priority) as step_aside:
            def pause() -> None:
                if bar is not None:
                    bar.touch()
                step_aside()

            yield pause

    return slot


def _settings(loaded: LoadedModel, view: ViewState, k: int | None, ccrs: tuple[int, ...] | None):
    return pga_settings(loaded.anatomy.d_model, (k,) if k else None, ccrs or (1,), seed=view.seed)


def stored_pga(view: ViewState, loaded: LoadedModel, k: int | None = None,
               ccrs: tuple[int, ...] | None = None) -> PGARun | None:
    """The exact run when every layer of it is in the cache, else None (nothing is computed)."""
    return analyses.model_pga(loaded, corpus(view), view.sampling, _settings(loaded, view, k, ccrs),
                              compute=view.compute, states=states(view, loaded), stored_only=True)


def preview_pga(view: ViewState, loaded: LoadedModel, k: int | None = None,
                ccrs: tuple[int, ...] | None = None) -> PGARun:
    """The preview (``preview_settings``: a second or so on a laptop CPU; at once when the background fill
    previewed it already); on a GPU the exact run itself. Through the gate first of all: other work steps
    aside within a few subspaces."""
    if not needs_preview(view.device):
        return pga(view, loaded, k, ccrs)
    settings = preview_settings(_settings(loaded, view, k, ccrs), view.device)
    with st.spinner("Preview ..."):
        return analyses.model_pga(loaded, corpus(view), view.sampling, settings, compute=view.compute,
                                  states=states(view, loaded), slot=_slot(Gate.PREVIEW))


def pga(view: ViewState, loaded: LoadedModel, k: int | None = None, ccrs: tuple[int, ...] | None = None,
        layers: list[int] | None = None, background: bool = False) -> PGARun:
    """The exact run at k (default d / 4, at most 100) and the CCR depths (default 1) for the given layers
    (all by default), one layer at a time through the gate; each (layer, k, CCR) cached on disk as it is
    done. A newer move stops it at the next layer (Streamlit reruns the page); finished layers stay."""
    settings = _settings(loaded, view, k, ccrs)
    label = f"{'Filling in' if background else 'Exact'}: k = {settings.ks[0]}, CCR {', '.join(map(str, settings.ccrs))}"
    with Bar(label) as bar:
        return analyses.model_pga(loaded, corpus(view), view.sampling, settings, layers, view.compute, bar,
                                  states=states(view, loaded), slot=_slot(Gate.FILL if background else Gate.EXACT, bar))


def _adjacent_k(grid: tuple[int, ...], k: int, ccr: int, steps: int = 1) -> list[tuple[int, int]]:
    index = grid.index(k) if k in grid else 0
    return [(grid[i], ccr) for i in (index - steps, index + steps) if 0 <= i < len(grid)]


def neighbours(grid: tuple[int, ...], k: int, ccr: int) -> list[tuple[int, int]]:
    """What a visitor is likely to ask next, in order: the adjacent k on the grid, then CCR 0, 1, 5, 10."""
    return list(dict.fromkeys(_adjacent_k(grid, k, ccr) + [(k, c) for c in (0, 1, 5, 10) if c != ccr]))


def along_sliders(grid: tuple[int, ...], k: int, ccr: int, reach: int | None = None,
                  deepest: int = 10) -> list[tuple[int, int]]:
    """Every setting one slider move from (k, CCR), nearest first: at each number of steps the k on either
    side on the grid, then CCR depth - steps and + steps; ``reach``: that many steps at most."""
    reach = max(len(grid), deepest + 1) if reach is None else reach
    return [setting for steps in range(1, reach + 1) for setting in
            _adjacent_k(grid, k, ccr, steps) + [(k, c) for c in (ccr - steps, ccr + steps) if 0 <= c <= deepest]]


def before_exact(grid: tuple[int, ...], k: int, ccr: int, deepest: int = 10) -> list[tuple[int, int]]:
    """What is previewed before the exact run starts: every setting one slider step away, then the ends of
    both sliders (where a jump lands: End, Home, a drag to the edge)."""
    ends = [(grid[0], ccr), (grid[-1], ccr), (k, 0), (k, deepest)]
    return list(dict.fromkeys(along_sliders(grid, k, ccr, 1, deepest) + [end for end in ends if end != (k, ccr)]))


def preview_ahead(view: ViewState, loaded: LoadedModel, previewed: list[tuple[int, int]]) -> None:
    """Ready each layer's PCA, then preview the ``previewed`` settings (:func:`along_sliders`) into memory as
    background work, so that a move there draws its preview at once. Any move of a widget stops it (the page
    reruns); a failure is one warning."""
    if demo_mode():  # a public instance spends no CPU on what nobody asked for
        return
    with Bar("Preparing the layers for quick previews") as bar:  # each layer's PCA, once per server process
        analyses.warm_pga(loaded, corpus(view), view.sampling, _settings(loaded, view, None, None), view.compute,
                          bar, states=states(view, loaded), slot=_slot(Gate.FILL, bar))
    if not needs_preview(view.device):
        return
    with Bar("Previewing along the sliders") as bar:
        for number, (k, c) in enumerate(previewed):
            bar("Previewing along the sliders", number, len(previewed))
            settings = preview_settings(_settings(loaded, view, k, (c,)), view.device)
            if not _background(k, c, analyses.model_pga, loaded, corpus(view), view.sampling, settings,
                               compute=view.compute, states=states(view, loaded), slot=_slot(Gate.FILL, bar)):
                return


def fill(view: ViewState, loaded: LoadedModel, wanted: list[tuple[int, int]]) -> None:
    """After the page is drawn: compute the ``wanted`` settings into the disk cache one after another as
    background work, with a line saying what is ready. Any move of a widget stops it (the page reruns); a
    failure is one warning and leaves every finished layer in the cache, nothing half-written."""
    if demo_mode():
        return
    status = st.empty()
    ready = {(k, c): stored_pga(view, loaded, k, (c,)) is not None for k, c in wanted}

    def show() -> None:
        status.caption("Nearby settings ready: " + ", ".join(
            f"k = {k}, CCR-{c} " + ("✓" if done else "…") for (k, c), done in ready.items()))

    show()
    for k, c in [key for key, done in ready.items() if not done]:
        if not _background(k, c, pga, view, loaded, k, (c,), background=True):
            return
        ready[k, c] = True
        show()


def _background(k: int, ccr: int, work: Callable, *args, **kwargs) -> bool:
    """``work(*args, **kwargs)`` as background fill for (k, CCR); False, after one warning, when it failed."""
    try:
        work(*args, **kwargs)
    except (InputError, MemoryError, RuntimeError) as error:
        st.warning(literal(f"Filling in k = {k}, CCR-{ccr} stopped: {error}"), icon=":material/warning:")
        return False
    return True


def triage(view: ViewState, loaded: LoadedModel) -> TriageRun:
    held = states(view, loaded)
    with Bar("Triage") as bar:
        return analyses.model_triage(loaded, corpus(view), view.sampling, view.compute, bar, states=held)


def report_download(view: ViewState, loaded: LoadedModel) -> Callable[[], str]:
    """The current view's triage report (the same file ``python -m analysis report`` writes), made when
    the visitor clicks. Streamlit runs it on another thread, with no page to draw on: the text and
    the file-path policy are taken now."""
    text, roots = corpus(view), roots_in_force()

    def generate() -> str:
        restrict_to(roots)
        with computation_slot():
            return analyses.model_report(loaded, text, view.sampling, view.compute).html()

    return generate


@st.cache_data(show_spinner=False, max_entries=16)
def _side(choice: ModelChoice, corpus_key: str, _view: ViewState) -> TriageRun:
    with Bar(f"Triage of {choice.label}") as bar:
        loaded = analyses.open_model(choice, _view.compute, bar)
        try:
            return analyses.model_triage(loaded, corpus(_view), _view.sampling, _view.compute, bar)
        finally:
            del loaded
            free_memory()


def side(view: ViewState, choice: ModelChoice) -> TriageRun:
    """One side of a comparison: the triage of ``choice`` on the view's text and sampling (the model is
    loaded for the call and released; the result is kept in memory)."""
    return _side(choice, f"{view.corpus}|{corpus(view).sha256}|{view.sampling.spec}|{view.device}", view)


def readout(loaded: LoadedModel) -> ReadoutBasis:
    """The readout basis and the singular values of W_U (disk-cached per model)."""
    return analyses.model_readout(loaded)


def capacity(view: ViewState, which: str = "embedding", sample_pairs: int | None = None) -> CapacityRun:
    """Cosine statistics, histogram and capacity of the chosen model's W_E or W_U."""
    with Bar(f"Cosine histogram of the {which}") as bar:
        return analyses.model_capacity(view.choice, which, sample_pairs=sample_pairs, device=view.device,
                                       progress=bar)


def measure_published(view: ViewState, name: str) -> Measured:
    """epsilon of a published model (the capacity atlas), measured from its embedding shard alone."""
    with Bar(f"Measuring {name}"):
        return analyses.measure_published(name, view.device)


@st.cache_data(show_spinner="Finding the models at hand ...", ttl=60)
def models_at_hand() -> list[tuple[str, int]]:
    """(reference, d_model) of the models this server holds, ordered by d_model (the width ladder)."""
    return at_hand.models_at_hand()


def paired(view: ViewState):
    """Histogram of cos(E_i, U_i), or None for a tied model."""
    return analyses.paired_cosines(view.choice)


def series(view: ViewState, model: str, revisions: list[str], k: int | None = None, ccr: int = 1) -> CheckpointSeries:
    """Per-checkpoint metrics and loss (each checkpoint cached on disk; a rerun resumes)."""
    with Bar("Checkpoints") as bar:
        return analyses.checkpoint_series(model, revisions, corpus(view), view.sampling, (k,) if k else None, (ccr,),
                                          compute=view.compute, progress=bar)


def stored_or_preview_series(view: ViewState, model: str, revisions: list[str], k: int | None = None,
                             ccr: int = 1) -> CheckpointSeries | None:
    """The stored series; else, on a CPU, its preview from the checkpoints' cached hidden states (no model
    loaded); else None (a checkpoint has never been measured: only the exact series will do)."""
    ks, text = (k,) if k else None, corpus(view)
    stored = analyses.checkpoint_series(model, revisions, text, view.sampling, ks, (ccr,), compute=view.compute,
                                        stored_only=True)
    if stored is not None or not needs_preview(view.device):
        return stored
    with st.spinner("Preview ..."):
        return analyses.checkpoint_series(model, revisions, text, view.sampling, ks, (ccr,), compute=view.compute,
                                          preview=True)


def convergence(view: ViewState, a: ModelChoice, b: ModelChoice, units: int) -> ConvergenceRun:
    """Two references (each with its revision) on the same passages of the built-in text."""
    with Bar("Convergence") as bar:
        return analyses.model_convergence(a, b, builtin_corpus(), units, seed=view.seed, compute=view.compute,
                                          progress=bar)


def probes(view: ViewState, loaded: LoadedModel, data: Labelled) -> ProbeRun:
    """Probe accuracy per layer beside z at the default k and CCR."""
    run = pga(view, loaded)
    with Bar("Pooling the texts") as bar:
        return analyses.model_probes(loaded, data, view.seed, run, bar)


def stored_token_map(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> TokenMapRun | None:
    """The UMAP when it is in the cache, else None (nothing is computed)."""
    return analyses.model_token_map(loaded, corpus(view), view.sampling, layer, ccr, compute=view.compute,
                                    stored_only=True)


def preview_token_map(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> TokenMapRun:
    """The top-two-PC plane after CCR (milliseconds), drawn while the UMAP runs."""
    return analyses.model_token_map(loaded, corpus(view), view.sampling, layer, ccr, compute=view.compute,
                                    preview=True)


def token_map(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> TokenMapRun:
    """The UMAP (cached on disk), computed through the gate: one heavy computation at a time."""
    with st.spinner("Computing the token map (UMAP) ..."), gate().hold(Gate.EXACT):
        return analyses.model_token_map(loaded, corpus(view), view.sampling, layer, ccr, compute=view.compute)


@st.cache_data(show_spinner="Reading the sweep results ...", ttl=60)
def stored(store_url: str) -> list[CheckpointSeries]:
    """Every model x settings series a sweep left in the result store (re-read each minute)."""
    return stored_series(ResultStore(store_url))


def train_demo_series() -> dict:
    """Train the offline demo series into the cache folder (about two minutes on a laptop CPU)."""
    with Bar("Training the demo series") as bar:
        return train_demo(cache_dir() / "train-demo", progress=bar)


@contextlib.contextmanager
def friendly_errors():
    """Show InputError and out-of-memory as readable messages, never as a traceback."""
    try:
        yield
    except InputError as error:
        st.error(literal(error), icon=":material/error:")
        st.stop()
    except torch.OutOfMemoryError:
        st.error("Out of memory: lower N (sidebar), choose a smaller model, or switch the device to cpu.",
                 icon=":material/memory:")
        st.stop()
    except MemoryError:
        st.error("The machine ran out of memory: lower N or choose a smaller model.", icon=":material/memory:")
        st.stop()
