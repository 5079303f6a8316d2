"""The pages' only way into ``analysis``: the library's door (``analysis.runs.analyses``) with
progress bars shown, errors made readable, and every heavy computation admitted by the server's policy
(``dashboard.admission``); work a page does not wait for goes to the session's background thread
(``dashboard.background``).

Caching: the loaded model is a ``st.cache_resource`` (``RG_RESIDENT_MODELS`` entries, default one: a
new model releases the old); the hidden states of the current view stay in memory; everything else comes
from the disk cache (``analysis.storage.cache``), so a second visitor, a second tab or a restarted app
reads it instead of recomputing.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable
from dataclasses import replace

import streamlit as st
import torch
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests, ScriptRequestType

from analysis.capacity.atlas import Measured
from analysis.data.corpus import Corpus, builtin_corpus, load_corpus
from analysis.data.labelled import Labelled
from analysis.errors import InputError
from analysis.geometry.pga import PGASettings
from analysis.geometry.readout import ReadoutBasis
from analysis.models import at_hand
from analysis.models.card import describe
from analysis.models.loading import LoadedModel, load
from analysis.models.refs import ModelRef, list_checkpoints, resolve
from analysis.models.train_demo import train_demo
from analysis.progress import TimeLeft
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
from analysis.runs.settings import (
    DEFAULT_CCR,
    PREVIEW_SECONDS,
    ModelChoice,
    block_preview,
    needs_preview,
    pga_settings,
    preview_first_layers,
    preview_layers,
    preview_order,
    preview_settings,
)
from analysis.storage.cache import Entry, on_recomputed
from analysis.storage.memory import ModestMemory, default_memory
from analysis.storage.paths import cache_dir, checked_path, restrict_to, roots_in_force
from analysis.storage.store import ResultStore
from dashboard.admission import Admission, Priority
from dashboard.background import Background, Task, show_status
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


class Bar:
    """A ``Progress`` callback that drives one Streamlit progress bar, naming the step. As a context manager it
    holds the admission policy's slot (``PAGE``, on ``model``'s identity), saying why while it waits, and
    removes the bar on the way out, whatever happened. Each progress report is a pause point.

    The bar is sent at most every ``SEND_EVERY`` seconds, and at once when the step changes: each send is
    drawn by the browser, which shares the cores with the computation (a 31-layer exact run at k = 1 on 2 cores:
    sent at every layer, the browser took 0.25 core-s more and the move 0.18 s longer)."""

    SEND_EVERY = 0.25

    def __init__(self, label: str, model: LoadedModel | ModelRef | None = None):
        self.shown, self.sent = (0.0, literal(label)), (time.monotonic(), "")
        self.label, self.model = label, (model.ref if isinstance(model, LoadedModel) else model)
        self.bar = st.progress(*self.shown)
        self.holding = contextlib.ExitStack()
        self.pause: Callable[[], None] = lambda: None
        self.time_left = TimeLeft()

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.shown = (min(done / max(total, 1), 1.0),
                      literal(f"{stage}: {done}/{total}{self.time_left(stage, done, total)}"))
        self.touch(stage)
        self.pause()

    def touch(self, stage: str | None = None) -> None:
        """Send the bar as it is now, if ``SEND_EVERY`` has passed since the last send or ``stage`` is new: also a
        point where Streamlit stops a run that a newer move superseded."""
        when, last = self.sent
        if time.monotonic() - when > self.SEND_EVERY or stage not in (None, last):
            self.sent = (time.monotonic(), stage or last)
            self.bar.progress(*self.shown)

    @contextlib.contextmanager
    def slot(self):
        """The library's ``slot``: its pause also re-sends the bar (where a superseded run is stopped at once)."""
        def pause() -> None:
            self.touch()
            self.pause()

        yield pause

    def __enter__(self) -> Bar:
        identity = self.model.identity if self.model is not None else None
        if reason := policy().waits(Priority.PAGE, identity):
            self.bar.progress(0.0, text=literal(f"Waiting: {reason} ..."))
        self.pause = self.holding.enter_context(page_hold(Priority.PAGE, self.label, identity))
        self.bar.progress(*self.shown)
        return self

    def __exit__(self, *_exc) -> None:
        self.holding.close()
        self.bar.empty()


RESIDENT_MODELS = max(1, int(os.environ.get("RG_RESIDENT_MODELS") or 1))


@st.cache_resource(max_entries=RESIDENT_MODELS, show_spinner=False)
def _resident(identity: str, device: str, _ref: ModelRef) -> LoadedModel:
    """``RESIDENT_MODELS`` models in memory at most: a new (identity, device) evicts and frees the least
    recently used one. The load waits (the bar says why) while work on another model is running.

    The progress bar is created inside (Streamlit replays a cached function's own elements only)."""
    with Bar(f"Loading {_ref.label}", _ref) as bar:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return load(_ref, device=device, progress=bar)


def loaded_model(view: ViewState) -> LoadedModel:
    """The sidebar's model, loaded (or resident already); a model it pushed out of memory is named."""
    ref = view_ref(view)
    loaded = _resident(ref.identity, view.device, ref)
    if released := policy().resident(ref.identity, ref.label):
        st.caption(literal(f"This server keeps {RESIDENT_MODELS} model(s) in memory (RG_RESIDENT_MODELS): loading "
                           f"{ref.label} released {', '.join(released)}."))
    return loaded


def corpus(view: ViewState) -> Corpus:
    """The text the sidebar chose (an upload lives in the session)."""
    if view.corpus == "builtin":
        return builtin_corpus()
    if view.corpus.startswith("upload:"):
        uploaded = st.session_state.get("uploads", {}).get(view.corpus)
        if uploaded is None:
            raise InputError("The uploaded text is not in this session any more: upload it again.")
        return uploaded
    return _opened_text(view.corpus, _text_version(view.corpus))


def _text_version(source: str) -> tuple[int, int] | None:
    """What tells a text file's contents apart without reading it (modification time, size), once the path
    policy allows the path; None for a Hub dataset or a path that load_corpus will refuse with its message."""
    if source.startswith("hf:"):
        return None
    try:
        stat = checked_path(source, "Text file").stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@st.cache_resource(max_entries=4, ttl=600, show_spinner=False)
def _opened_text(source: str, version: tuple[int, int] | None) -> Corpus:
    """A text file or Hub dataset read once, not at every call of a page run (a page asks for it per task)."""
    return load_corpus(source)


@st.cache_resource(max_entries=2, show_spinner=False)
def _states(key: str, _view: ViewState, _loaded: LoadedModel) -> Entry:
    with Bar("Hidden states", _loaded) as bar:
        return analyses.model_hidden_states(_loaded, corpus(_view), _view.sampling, _view.compute, bar)


def states(view: ViewState, loaded: LoadedModel) -> Entry:
    """The cache entry of the view's hidden states (every layer), kept in memory for the view."""
    key = f"{loaded.spec}|{view.corpus}|{corpus(view).sha256}|{view.sampling.spec}"
    return _states(key, view, loaded)


_POLICY = Admission(resident_models=RESIDENT_MODELS)


def policy() -> Admission:
    """The server's admission policy (``RG_RESIDENT_MODELS``: models kept in memory at once, default 1): one
    object for the process, not a Streamlit cache entry (clearing the caches must not start a second one)."""
    return _POLICY


DRAWING_SECONDS = 10.0  # a page run starting: the visitor's other work waits until it is drawn, this long at most
# a page drawn: the visitor's other work waits while the browser draws its first chart. Chromium drew a move's z
# chart 0.0-0.3 s after the page run sent it (2 cores; the rest of the page after it). Half a second made the exact
# curve wait for a browser already done: the moves after the first took 1.48-1.72x the engine's sweep from the key
# press, against 1.42-1.49x at 0.15 s, where the z chart was drawn as soon (BENCHMARKS.md)
RENDERING_SECONDS = 0.15


def _visitor() -> str | None:
    """The session whose script run this is (the owner of its quiet)."""
    ctx = get_script_run_ctx()
    return None if ctx is None else ctx.session_id


def _superseded() -> None:
    """Stop this script run (Streamlit's ``StopException``) when Streamlit has told it to: a newer move started a run
    beside it (``runner.fastReruns``), so its work would be drawn for nobody."""
    ctx = get_script_run_ctx()
    if ctx is not None and stop_requested(ctx.script_requests):
        raise StopException()


def stop_requested(requests: ScriptRequests | None) -> bool:
    """Whether a script run's ``requests`` say stop. Streamlit (pinned in requirements.txt) has no public flag for
    it: this reads their state, and a test pins it against Streamlit's own ``request_stop``."""
    return requests is not None and getattr(requests, "_state", None) == ScriptRequestType.STOP


def page_hold(priority: Priority, name: str, model: str | None = None):
    """The admission slot for this page run's work: as its visitor's, and given up (waiting, or at the work's next
    pause point) once a newer run superseded this one."""
    return policy().hold(priority, name, model, _visitor(), _superseded)


def _connected(session: str | None) -> Callable[[], bool]:
    """Whether ``session``'s browser is still connected (Streamlit drops a closed or reloaded tab's session from its
    active ones; a reconnect brings it back)."""
    runtime = Runtime.instance() if session is not None and Runtime.exists() else None
    return lambda: runtime is None or runtime.is_active_session(session)


def page_started() -> None:
    """A visitor's page run began (the sidebar calls this): the visitor's own work outside it waits until it is drawn
    (:meth:`Admission.quiet`; other visitors' work runs on)."""
    policy().quiet(DRAWING_SECONDS, _visitor())


def page_drawn() -> None:
    """The visible part of the page is sent; the visitor's other work starts ``RENDERING_SECONDS`` later, once the
    browser has drawn it."""
    policy().quiet(RENDERING_SECONDS, _visitor())


def _settings(loaded: LoadedModel, view: ViewState, k: int | None, ccrs: tuple[int, ...] | None):
    return pga_settings(loaded.anatomy.d_model, (k,) if k else None, ccrs or (DEFAULT_CCR,), seed=view.seed)


def stored_pga(view: ViewState, loaded: LoadedModel, k: int | None = None,
               ccrs: tuple[int, ...] | None = None) -> PGARun | None:
    """The exact run when every layer of it is in the cache, else None (nothing is computed)."""
    return analyses.model_pga(loaded, corpus(view), view.sampling, _settings(loaded, view, k, ccrs),
                              compute=view.compute, states=states(view, loaded), stored_only=True)


def preview_pga(view: ViewState, loaded: LoadedModel, k: int | None = None, ccrs: tuple[int, ...] | None = None,
                shown_layer: int | None = None) -> PGARun:
    """The preview made ahead (``preview_settings``) when every layer of it is remembered; else the quickest one,
    made now. Where the page shows ``shown_layer`` beside the curve: up to k = 16 and N = 512, where ranking is most of
    the work, the exact run itself at a few layers and that one (``preview_layers``: it then computes only the
    others); else ``block_preview`` at ``preview_first_layers`` layers of ``preview_order`` (with that one), then at
    more while the preview has taken less than ``PREVIEW_SECONDS`` (a jump to a wide k drew nothing for 2-5 s on
    2 cores while every layer's preview projected). Without ``shown_layer``, ``block_preview`` at every layer. (Up to
    k = 16 a preview made ahead scores the exact sweep's first draws on every pair, which the exact run then need not
    score, but made while the visitor waits it came 0.3-0.5 s later than one on 128-token blocks, BENCHMARKS.md.)
    Where a preview would not pay (a GPU, k = 1: :func:`needs_preview`) the exact run itself. At the policy's first
    priority: other work steps aside at its next pause point. The exact run's layers stored so far take the
    preview's place (:meth:`PGARun.with_exact`): a long exact run is drawn layer by layer (``Task.shows_layers``).
    A preview at some layers carries the others' PC angles and spectral metrics (``PGARun.shapes``)."""
    if not needs_preview(view.device, k):
        return pga(view, loaded, k, ccrs)
    exact, held = _settings(loaded, view, k, ccrs), states(view, loaded)
    so_far = analyses.model_pga_so_far(loaded, exact, held)
    drawn = _preview_pga(view, loaded, exact, held, shown_layer, {result.layer for result in so_far})
    drawn = drawn.with_exact([result for result in so_far if result.layer not in drawn.exact_layers], exact)
    if drawn.of_layers is None:
        return drawn
    # the lower charts whole: the PC angles and spectral metrics of the other layers, as the exact run will draw them
    # (milliseconds, from the layers' PCAs; so chromium need not replot the PC charts when the exact curve comes)
    have = {result.layer for result in drawn.results}
    missing = [layer for layer in range(drawn.of_layers) if layer not in have]
    return replace(drawn, shapes=tuple(analyses.model_shapes(loaded, exact, held, missing, view.compute)))


def _preview_pga(view: ViewState, loaded: LoadedModel, exact: PGASettings, held: Entry, shown_layer: int | None,
                 done: set[int] = frozenset()) -> PGARun:
    """:func:`preview_pga`'s preview of the ``exact`` settings on the hidden states ``held``, but at the layers
    ``done`` (the exact run's, stored): while the exact run stores its layers, the page's rerun to draw them draws
    the preview it made at the others and computes nothing more."""
    d = loaded.anatomy.d_model
    ahead, own = preview_settings(exact, d), block_preview(exact, d)
    if ahead != own:  # else the page's own run below finds the layers made ahead
        made = analyses.model_pga(loaded, corpus(view), view.sampling, ahead, compute=view.compute, states=held,
                                  stored_only=True)
        if made is not None:
            return made
    n_entries, n_tokens = held.value.states.shape[:2]
    with contextlib.ExitStack() as holding, st.spinner("Preview ..."):
        pauses = []

        @contextlib.contextmanager
        def slot():  # the page's hold, taken at the first work and kept to the end: given back between layers, it
            if not pauses:  # waited each time for the background's next pause point (0.3-0.5 s a move at d = 2048)
                pauses.append(holding.enter_context(page_hold(Priority.PREVIEW, "a preview", loaded.ref.identity)))
            yield pauses[0]

        def run(settings: PGASettings, layers: list[int] | None = None, until: float | None = None) -> PGARun:
            return analyses.model_pga(loaded, corpus(view), view.sampling, settings, layers, view.compute,
                                      states=held, slot=slot, until=until)

        if shown_layer is None:
            return _of_layers(run(own, [layer for layer in range(n_entries) if layer not in done]), n_entries)
        spread = preview_layers(exact, n_tokens, n_entries, shown_layer)
        if spread is not None:
            return replace(run(exact, spread), preview=True, of_layers=n_entries, exact_layers=tuple(spread))
        started = time.monotonic()
        order = [layer for layer in preview_order(n_entries, shown_layer) if layer not in done]
        count = preview_first_layers(own, n_tokens, d)
        if done:  # what is remembered (a time long past: nothing computed), if with the exact layers it is enough
            drawn = run(own, order, 0.0)  # and holds the layer shown (a layer move while the exact run goes on)
            ready = done | {result.layer for result in drawn.results}
            if len(ready) >= count and shown_layer % n_entries in ready:
                return _of_layers(drawn, n_entries)
        first, rest = run(own, order[:count]), order[count:]
        more = run(own, rest, started + PREVIEW_SECONDS).results if rest else ()
    return _of_layers(replace(first, results=first.results + more), n_entries)


def _of_layers(preview: PGARun, n_entries: int) -> PGARun:
    """``preview`` with its results in layer order and ``of_layers`` set where it lacks some of the ``n_entries``."""
    results = sorted(preview.results, key=lambda result: result.layer)  # stable: each layer's k and CCR in order
    return replace(preview, results=tuple(results),
                   of_layers=n_entries if len({result.layer for result in results}) < n_entries else None)


def pga(view: ViewState, loaded: LoadedModel, k: int | None = None, ccrs: tuple[int, ...] | None = None,
        layers: list[int] | None = None) -> PGARun:
    """The exact run at k (default d / 4, at most 100) and the CCR depths (default 1) for the given layers
    (all by default), drawn on the page as it runs; each (layer, k, CCR) cached on disk as it is done. A
    newer move stops it at the next pause (Streamlit reruns the page); finished layers stay."""
    settings = _settings(loaded, view, k, ccrs)
    with Bar(f"Exact: k = {settings.ks[0]}, CCR {', '.join(map(str, settings.ccrs))}", loaded) as bar:
        return analyses.model_pga(loaded, corpus(view), view.sampling, settings, layers, view.compute, bar,
                                  states=states(view, loaded), slot=bar.slot)


def _scope(view: ViewState, loaded: LoadedModel) -> str:
    """What a background task's result depends on besides its own settings."""
    return f"{loaded.spec}|{view.corpus}|{corpus(view).sha256}|{view.sampling.spec}|{view.seed}|{view.compute}"


def exact_task(view: ViewState, loaded: LoadedModel, k: int | None = None, ccrs: tuple[int, ...] | None = None,
               shows: bool = True, group: str = "Exact curve", states_in_task: bool = False,
               shown_layer: int | None = None) -> Task:
    """The exact run as background work: the page shows its preview meanwhile and reruns when it is done
    (``shows``); as fill (``shows=False``) at the lowest priority, pushing nothing out of the engine's memory
    (:class:`ModestMemory`). ``states_in_task``: the task reads (or computes) the hidden states itself, for a page that
    has not got them yet. ``shown_layer``: the layer the page shows beside the curve, whose preview (``preview_pga``)
    draws the layers stored so far: the run computes the layers in ``preview_order`` from it, spread out, and the page
    is rerun to draw them as they come (``Task.shows_layers``)."""
    settings, text = _settings(loaded, view, k, ccrs), corpus(view)
    held = None if states_in_task else states(view, loaded)
    memory = default_memory() if shows else ModestMemory(default_memory())
    layers = None if held is None or shown_layer is None else preview_order(held.value.n_layers, shown_layer)

    def run(progress, slot) -> None:
        if held is not None and analyses.model_pga_stored(loaded, settings, held):
            return  # stored meanwhile, or before: nothing to compute, nothing to read here
        analyses.model_pga(loaded, text, view.sampling, settings, layers, view.compute, progress, states=held,
                           slot=slot, memory=memory)

    priority = Priority.NEXT if shows else Priority.BACKGROUND
    return Task(f"k = {settings.ks[0]}, CCR-{', '.join(map(str, settings.ccrs))}", group, priority, run,
                loaded.ref.identity, _scope(view, loaded), shows, shows and layers is not None)


def ahead_tasks(view: ViewState, loaded: LoadedModel, wanted: list[tuple[int, int]]) -> list[Task]:
    """Each layer's PCA readied; the null bases of the widest k ``wanted`` drawn (the k slider's end: a jump's preview
    there spent half its time drawing them, 2 of 4 s at d = 2048, and a preview of any depth at that k uses them);
    then each of the ``wanted`` (k, CCR) settings in turn, so that a move there draws at once (background work): its
    preview into memory, or where the exact curve is as quick as a preview (:func:`needs_preview`: k = 1 on the CPU,
    every k on a GPU) the exact run itself into the disk cache, as :func:`fill_tasks` would make it after every preview
    (else a jump to k = 1 computes it in the page run: ~1 s drawn, against ~0.5 s read from the cache). A setting
    whose exact run is stored (the one just left, above all) is not previewed: a move there draws the exact curve."""
    text, held, identity, d = corpus(view), states(view, loaded), loaded.ref.identity, loaded.anatomy.d_model

    def warm(progress, slot) -> None:
        analyses.warm_pga(loaded, text, view.sampling, _settings(loaded, view, None, None), view.compute,
                          progress, states=held, slot=slot)

    widest = max((k for k, _ in wanted), default=1)

    def draw_bases(_progress, slot) -> None:
        settings = preview_settings(_settings(loaded, view, widest, None), d)
        analyses.ready_model_bases(loaded, settings, view.compute, slot)

    def preview(k: int, c: int):
        exact = _settings(loaded, view, k, (c,))

        def run(_progress, slot) -> None:
            if not analyses.model_pga_stored(loaded, exact, held):  # else a move there draws the exact curve
                analyses.model_pga(loaded, text, view.sampling, preview_settings(exact, d), compute=view.compute,
                                   states=held, slot=slot)
        return run

    scope = _scope(view, loaded)
    readying = [Task("PCA of every layer", "Previews ahead", Priority.BACKGROUND, warm, identity, scope)]
    if needs_preview(view.device, widest):
        readying.append(Task(f"bases of k = {widest}", "Previews ahead", Priority.BACKGROUND, draw_bases, identity,
                             scope))
    return readying + [
        Task(f"k = {k}, CCR-{c}", "Previews ahead", Priority.BACKGROUND, preview(k, c), identity, scope)
        if needs_preview(view.device, k) else _fill_task(view, loaded, k, c) for k, c in wanted]


def fill_tasks(view: ViewState, loaded: LoadedModel, wanted: list[tuple[int, int]]) -> list[Task]:
    """The exact runs of the ``wanted`` (k, CCR) settings that are previewed ahead (:func:`ahead_tasks` readies the
    others exactly), as background work: a setting in the disk cache already is done at once, its keys looked up and
    nothing read (reading it took ~0.25 s)."""
    return [_fill_task(view, loaded, k, c) for k, c in wanted if needs_preview(view.device, k)]


def _fill_task(view: ViewState, loaded: LoadedModel, k: int, ccr: int) -> Task:
    """The exact run of (k, ``ccr``) as fill: the same task whichever list holds it."""
    return exact_task(view, loaded, k, (ccr,), shows=False, group="Nearby settings")


def background(tasks: list[Task], where=None) -> None:
    """Hand ``tasks`` to this session's background thread and draw the status line (in ``where``, a container
    the page kept for it, else here). In demo mode only the tasks whose result the page shows run (a public
    instance spends no CPU on what nobody asked for); a visitor who closes the tab stops the session's work at its
    next pause point."""
    if demo_mode():
        tasks = [task for task in tasks if task.shows]
    worker = st.session_state.get("background")
    if worker is None:
        session = _visitor()
        worker = st.session_state["background"] = Background(policy(), session, _connected(session))
    worker.replace(tasks)
    with where if where is not None else contextlib.nullcontext():
        show_status(worker)


def triage_task(view: ViewState, loaded: LoadedModel) -> Task:
    """The whole verdict as background work the page shows when done: the exact curve, the deeper CCR at the worst
    late layer, the embedding's epsilon (the page's rerun then reads them all from the cache)."""
    text, held = corpus(view), states(view, loaded)

    def run(progress, slot) -> None:
        analyses.model_triage(loaded, text, view.sampling, view.compute, progress, states=held, slot=slot)

    return Task("the exact curve, the deeper CCR and epsilon", "Verdict", Priority.NEXT, run, loaded.ref.identity,
                _scope(view, loaded), shows=True)


def triage(view: ViewState, loaded: LoadedModel) -> TriageRun:
    held = states(view, loaded)
    with Bar("Triage", loaded) as bar:
        return analyses.model_triage(loaded, corpus(view), view.sampling, view.compute, bar, states=held)


def report_download(view: ViewState, loaded: LoadedModel) -> Callable[[], str]:
    """The current view's triage report (the same file ``python -m analysis report`` writes), made when
    the visitor clicks. Streamlit runs it on another thread, with no page to draw on: the text and
    the file-path policy are taken now."""
    text, roots, admission, visitor = corpus(view), roots_in_force(), policy(), _visitor()

    def generate() -> str:
        restrict_to(roots)
        with admission.hold(Priority.PAGE, "the report", loaded.ref.identity, visitor):
            return analyses.model_report(loaded, text, view.sampling, view.compute).html()

    return generate


def _side_triage(choice: ModelChoice, view: ViewState, preview: bool) -> TriageRun:
    """The sidebar's own model is the resident one (neither loaded again nor released); another is loaded for the
    call and released."""
    resident = resolved(choice.name, choice.revision or "", choice.tokenizer or "") == view_ref(view)
    loaded = loaded_model(view) if resident else None
    with Bar(f"{'Preview' if preview else 'Triage'} of {choice.label}") as bar:
        loaded = loaded or analyses.open_model(choice, view.compute, bar)
        try:
            return analyses.model_triage(loaded, corpus(view), view.sampling, view.compute, bar, preview=preview)
        finally:
            if not resident:
                del loaded
                free_memory()


@st.cache_data(show_spinner=False, max_entries=16)
def _side(choice: ModelChoice, corpus_key: str, _view: ViewState) -> TriageRun:
    return _side_triage(choice, _view, preview=False)


def side(view: ViewState, choice: ModelChoice, preview: bool = False) -> TriageRun:
    """One side of a comparison: the triage of ``choice`` on the view's text and sampling (the sidebar's model
    is the resident one, another is loaded for the call and released; the result is kept in memory). ``preview``:
    where this session has not had the exact triage yet, the stored one or else its preview
    (:func:`analysis.runs.analyses.model_triage`: after the forward pass, seconds instead of the exact sweep), kept
    in memory by no one: the page asks for the exact one after drawing it."""
    key = f"{view.corpus}|{corpus(view).sha256}|{view.sampling.spec}|{view.device}"
    had = st.session_state.setdefault("exact sides", set())
    if preview and (choice, key) not in had:
        run = _side_triage(choice, view, preview=True)
        if not run.pga.preview:  # stored: the exact triage
            had.add((choice, key))
        return run
    had.add((choice, key))
    return _side(choice, key, view)


def readout(loaded: LoadedModel) -> ReadoutBasis:
    """The readout basis and the singular values of W_U (disk-cached per model; an SVD of W_U the first time)."""
    with page_hold(Priority.PAGE, "the readout basis", loaded.ref.identity):
        return analyses.model_readout(loaded)


def capacity(view: ViewState, which: str = "embedding", sample_pairs: int | None = None) -> CapacityRun:
    """Cosine statistics, histogram and capacity of the chosen model's W_E or W_U."""
    with Bar(f"Cosine histogram of the {which}") as bar:
        return analyses.model_capacity(view.choice, which, sample_pairs=sample_pairs, device=view.device,
                                       progress=bar)


def stored_or_preview_capacity(view: ViewState, which: str = "embedding") -> CapacityRun:
    """The all-pairs histogram when it is in the cache; else the exact statistics with a preview histogram
    (every pair among a few thousand random rows: a second or two), drawn while :func:`capacity_task` counts
    every pair."""
    stored = analyses.model_capacity(view.choice, which, device=view.device, stored_only=True)
    if stored is not None:
        return stored
    with st.spinner(f"Preview of the {which}'s cosines ..."), page_hold(Priority.PAGE, "a histogram preview"):
        return analyses.model_capacity(view.choice, which, device=view.device, preview=True)


def capacity_task(view: ViewState, which: str = "embedding") -> Task:
    """The histogram of all pairs (cached on disk) as background work the page shows when it is done."""
    choice, device = view.choice, view.device

    def run(progress, _slot) -> None:
        analyses.model_capacity(choice, which, device=device, progress=progress)

    return Task(f"all pairs of the {which}", "Cosine histogram", Priority.NEXT, run, None,
                f"{view_ref(view).identity}|{device}", shows=True)


def measure_published(view: ViewState, name: str) -> Measured:
    """epsilon of a published model (the capacity atlas), measured from its embedding shard alone."""
    with Bar(f"Measuring {name}"):
        return analyses.measure_published(name, view.device)


@st.cache_data(show_spinner="Finding the models at hand ...", ttl=60)
def models_at_hand() -> list[tuple[str, int]]:
    """(reference, d_model) of the models this server holds, ordered by d_model (the width ladder)."""
    return at_hand.models_at_hand()


def paired(view: ViewState):
    """Histogram of cos(E_i, U_i), or None for a tied model (both matrices read from the weight files)."""
    with page_hold(Priority.PAGE, "the paired cosines"):
        return analyses.paired_cosines(view.choice)


def series(view: ViewState, model: str, revisions: list[str], k: int | None = None, ccr: int = 1) -> CheckpointSeries:
    """Per-checkpoint metrics and loss (each checkpoint cached on disk; a rerun resumes)."""
    with Bar("Checkpoints") as bar:
        return analyses.checkpoint_series(model, revisions, corpus(view), view.sampling, (k,) if k else None, (ccr,),
                                          compute=view.compute, progress=bar)


def stored_or_preview_series(view: ViewState, model: str, revisions: list[str], k: int | None = None,
                             ccr: int = 1) -> CheckpointSeries | None:
    """The stored series; else, on a CPU, its preview from the checkpoints' cached hidden states and readout bases (a
    checkpoint that misses one is loaded first for them: a forward pass, not the exact sweep; the loss comes with
    the exact series); on a GPU, None (the exact series is as quick to come)."""
    ks, text = (k,) if k else None, corpus(view)
    stored = analyses.checkpoint_series(model, revisions, text, view.sampling, ks, (ccr,), compute=view.compute,
                                        stored_only=True)
    if stored is not None or not needs_preview(view.device):
        return stored

    def preview() -> CheckpointSeries | None:
        with st.spinner("Preview ..."), page_hold(Priority.PREVIEW, "a series preview"):
            return analyses.checkpoint_series(model, revisions, text, view.sampling, ks, (ccr,),
                                              compute=view.compute, preview=True)

    found = preview()
    if found is None:
        with Bar("Hidden states of the checkpoints") as bar:
            analyses.prepare_series(model, revisions, text, view.sampling, view.compute, bar)
        found = preview()
    return found


def convergence(view: ViewState, a: ModelChoice, b: ModelChoice, units: int) -> ConvergenceRun:
    """Two references (each with its revision) on the same passages of the built-in text."""
    with Bar("Convergence") as bar:
        return analyses.model_convergence(a, b, builtin_corpus(), units, seed=view.seed, compute=view.compute,
                                          progress=bar)


def stored_or_preview_probes(view: ViewState, loaded: LoadedModel, data: Labelled) -> ProbeRun:
    """Probe accuracy per layer beside z at the default k and CCR, as stored: on every text, else on the seeded
    subset a preview pools first (``preview_texts``). Else, where the hidden states are at hand, z alone (stored, or
    its preview) with the probes to follow (:func:`probes_tasks`: pooling the subset in the page drew nothing for
    50 s at the Pythia-1B shape on 2 cores); where they are not, the probes on the subset, pooled now."""
    z = None
    if analyses.model_hidden_states(loaded, corpus(view), view.sampling, view.compute, stored_only=True):
        z = stored_pga(view, loaded) or preview_pga(view, loaded)
    stored = (analyses.model_probes(loaded, data, view.seed, z, stored_only=True)
              or analyses.model_probes(loaded, data, view.seed, z, preview=True, stored_only=True))
    if stored is not None:
        return stored
    if z is not None:
        return ProbeRun(loaded.ref.label, loaded.ref.identity, data.name, None, z, len(data.texts))
    with Bar("Pooling a quarter of the texts", loaded) as bar:
        return analyses.model_probes(loaded, data, view.seed, z, bar, preview=True)


def probes_tasks(view: ViewState, loaded: LoadedModel, data: Labelled, run: ProbeRun) -> list[Task]:
    """What ``run`` lacks, as background work the page shows when done: the probes on the preview's subset of the
    texts where it has none yet, on every text, the exact z (after the hidden states, when they are not at hand
    yet)."""
    tasks, scope = [], f"{_scope(view, loaded)}|{data.digest}"

    def pool(preview: bool):
        return lambda progress, _slot: analyses.model_probes(loaded, data, view.seed, progress=progress,
                                                             preview=preview)

    if run.result is None:
        first = len(analyses.preview_texts(len(data.texts), view.seed))
        tasks.append(Task(f"{first} texts first", "Probes", Priority.NEXT, pool(True), loaded.ref.identity, scope,
                          shows=True))
    if run.of_texts is not None:
        tasks.append(Task(f"all {run.of_texts} texts", "Probes", Priority.NEXT, pool(False), loaded.ref.identity,
                          scope, shows=True))
    if run.pga is None or run.pga.preview:
        tasks.append(exact_task(view, loaded, states_in_task=run.pga is None))
    return tasks


def stored_token_map(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> TokenMapRun | None:
    """The UMAP when it is in the cache, else None (nothing is computed)."""
    return analyses.model_token_map(loaded, corpus(view), view.sampling, layer, ccr, compute=view.compute,
                                    stored_only=True)


def preview_token_map(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> TokenMapRun:
    """The top-two-PC plane after CCR (milliseconds), drawn while the UMAP runs."""
    return analyses.model_token_map(loaded, corpus(view), view.sampling, layer, ccr, compute=view.compute,
                                    preview=True)


def token_map_task(view: ViewState, loaded: LoadedModel, layer: int, ccr: int) -> Task:
    """The UMAP (cached on disk) as background work the page shows when it is done; its epochs' progress reports
    are its pause points (a preview asked meanwhile waits about 0.1 s, not the whole map: 0.6-2 s at N = 512)."""
    text = corpus(view)

    def run(progress, _slot) -> None:
        analyses.model_token_map(loaded, text, view.sampling, layer, ccr, compute=view.compute, progress=progress)

    return Task(f"layer {layer}, CCR-{ccr}", "Token map (UMAP)", Priority.NEXT, run, loaded.ref.identity,
                _scope(view, loaded), shows=True)


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
