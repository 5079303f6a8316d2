"""The one door into the library: one entry per analysis, called alike by the CLI, the dashboard and
the sweep jobs. Each takes the user's choices (``analysis.runs.settings``), fills in the defaults
from there, runs the cached chain (``analysis.runs.pipeline``) and returns a result collection
(``analysis.results.collections``) that carries the settings it was computed with, its table and
its figures.

| analysis | entry | returns |
|---|---|---|
| model card | :func:`model_card` | dict |
| hidden states | :func:`model_hidden_states` | cache Entry of HiddenStates |
| Subspace PGA of a model on a text | :func:`model_pga` (or :func:`arrays_pga`; :func:`warm_pga` readies it) | PGARun |
| triage verdict | :func:`model_triage` | TriageRun |
| capacity of a model | :func:`model_capacity` (or :func:`formula_capacity`) | CapacityRun / CapacityReport |
| a checkpoint series | :func:`checkpoint_series` | CheckpointSeries |
| convergence of two references | :func:`model_convergence` | ConvergenceRun |
| linear probes | :func:`model_probes` | ProbeRun |
| the token map | :func:`model_token_map` | TokenMapRun |
| the triage report | :func:`model_report` | ModelReport (``.html()``) |
| a published model measured here | :func:`measure_published` | Measured (published and measured epsilon) |
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from analysis.activations.hidden import hidden_states, stored_hidden_states
from analysis.capacity.atlas import Measured, find_published, published_models
from analysis.capacity.formulas import CapacityReport, capacity_report
from analysis.data.corpus import Corpus, Sampling, text_chunks
from analysis.data.labelled import Labelled
from analysis.errors import require
from analysis.geometry.convergence import convergence
from analysis.geometry.pga import LayerPGA, LayerShape, PGASettings, default_k, pga_sweep, ready_bases, validate_states
from analysis.geometry.probes import probe_layers
from analysis.geometry.readout import readout_basis
from analysis.geometry.token_map import token_class, token_map
from analysis.geometry.verdict import verdict, worst_late_layer
from analysis.models.card import describe
from analysis.models.loading import LoadedModel, load
from analysis.models.refs import ModelRef, list_checkpoints, resolve
from analysis.progress import Progress
from analysis.results.collections import (
    CapacityRun,
    CheckpointSeries,
    ConvergenceRun,
    PGARun,
    ProbeRun,
    TokenMapRun,
    TriageRun,
)
from analysis.results.report import ModelReport
from analysis.runs.pipeline import (
    cached_pga,
    embedding_unembedding_cosines,
    layer_shapes,
    matrix_geometry,
    matrix_preview,
    matrix_stats,
    model_pooled,
    model_readout,
    pga_stored,
    preview_texts,
    ready_pcas,
    stored_pga_layers,
)
from analysis.runs.series import free_memory, prepare_checkpoints, training_sweep, weights_fingerprint
from analysis.runs.settings import (
    CONVERGENCE_N_NULL,
    CONVERGENCE_UNITS,
    DEFAULT_CCR,
    DEFAULT_N_NULL,
    HISTOGRAM_BINS,
    REPORT_CCRS,
    SENSITIVITY_DELTA,
    TRIAGE_DEEPER_CCR,
    Compute,
    ModelChoice,
    clip_epsilon,
    needs_preview,
    pga_settings,
    preview_settings,
    preview_subspaces,
)
from analysis.storage.cache import Entry, ResultCache, default_cache, library_versions
from analysis.storage.memory import EngineMemory
from analysis.storage.store import ResultStore

TOKEN_MAP_VERSION = 1
TOKEN_MAP_SHAPE = {"coords": np.ndarray, "pc1": np.ndarray, "share_in_readout": np.ndarray}
DEFAULT_COMPUTE = Compute()


def resolve_choice(choice: ModelChoice, weights: bool = True) -> ModelRef:
    """The choice's immutable reference (revision -> commit SHA or content hash)."""
    return resolve(choice.name, choice.revision, allow_pickle=choice.allow_pickle, weights=weights,
                   tokenizer=choice.tokenizer)


def open_model(choice: ModelChoice, compute: Compute = DEFAULT_COMPUTE,
               progress: Progress | None = None) -> LoadedModel:
    """Resolve and load the chosen model."""
    return load(resolve_choice(choice), compute.device, compute.dtype, choice.trust_remote_code, progress)


def model_card(choice: ModelChoice) -> dict:
    """The card from the configuration alone (see ``analysis.models.card.describe``)."""
    return describe(resolve_choice(choice, weights=False), choice.trust_remote_code)


def model_hidden_states(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, compute: Compute = DEFAULT_COMPUTE,
                        progress: Progress | None = None, cache: ResultCache | None = None,
                        stored_only: bool = False) -> Entry | None:
    """Hidden states ``[n_layers + 1, N, d]`` of the sampled positions, cached (``Entry.value``; ``stored_only``:
    None unless cached)."""
    if stored_only:
        return stored_hidden_states(loaded.spec, corpus, sampling, cache or default_cache())
    return hidden_states(loaded, corpus, sampling, compute.batch_size, progress, cache or default_cache())


def model_pga(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, settings: PGASettings | None = None,
              layers: list[int] | None = None, compute: Compute = DEFAULT_COMPUTE, progress: Progress | None = None,
              cache: ResultCache | None = None, states: Entry | None = None, stored_only: bool = False,
              slot: Callable[[], AbstractContextManager] = nullcontext,
              memory: EngineMemory | None = None, until: float | None = None) -> PGARun | None:
    """Subspace PGA of every chosen layer (all by default) at every (k, CCR) of ``settings`` (default:
    ``pga_settings(d)`` with the sampling's seed); each (layer, k, CCR) cached on its own. ``states``:
    the hidden-states entry when the caller already holds it; ``stored_only``, ``slot``, ``memory``, ``until``: see
    :func:`cached_pga` (None when ``stored_only`` and anything is missing)."""
    cache = cache or default_cache()
    settings = settings or pga_settings(loaded.anatomy.d_model, seed=sampling.seed)
    entry = states or model_hidden_states(loaded, corpus, sampling, compute, progress, cache)
    hidden = entry.value
    layers = list(range(hidden.n_layers)) if layers is None else list(layers)
    for_previews = preview_subspaces(settings, loaded.anatomy.d_model, compute.device) if compute.previews else 0
    results = cached_pga(hidden, entry.provenance["spec"], model_readout(loaded, cache, memory), loaded.spec,
                         settings, layers, compute.device, progress, cache, stored_only, slot, memory, for_previews,
                         until)
    if results is None:
        return None
    return PGARun(tuple(results), settings, loaded.ref.label, loaded.ref.identity, loaded.spec["dtype"],
                  entry.provenance, preview=settings.preview)


def model_shapes(loaded: LoadedModel, settings: PGASettings, states: Entry, layers: list[int],
                 compute: Compute = DEFAULT_COMPUTE, memory: EngineMemory | None = None) -> list[LayerShape]:
    """The PC angles and spectral metrics of ``settings`` on the hidden-states entry ``states`` at those of ``layers``
    whose PCA the engine remembers (:func:`~analysis.geometry.pga.remembered_shapes`: nothing fitted, milliseconds a
    layer): a preview at some layers draws its lower charts whole with them."""
    return layer_shapes(states.value.states, states.provenance["spec"], model_readout(loaded, memory=memory),
                        settings, layers, compute.device, memory)


def model_pga_stored(loaded: LoadedModel, settings: PGASettings, states: Entry,
                     cache: ResultCache | None = None) -> bool:
    """Whether :func:`model_pga` of ``settings`` on the hidden-states entry ``states`` would read every layer from the
    disk cache (keys looked up, nothing read)."""
    return pga_stored(states.provenance["spec"], loaded.spec, settings, list(range(states.value.n_layers)), cache)


def model_pga_so_far(loaded: LoadedModel, settings: PGASettings, states: Entry,
                     cache: ResultCache | None = None) -> list[LayerPGA]:
    """:func:`model_pga`'s results of ``settings`` on the hidden-states entry ``states`` at the layers stored so far
    (every k and CCR of each; nothing computed), layer by layer as an exact run stores them."""
    return stored_pga_layers(states.provenance["spec"], loaded.spec, settings, list(range(states.value.n_layers)),
                             cache)


def arrays_pga(states: np.ndarray, w_u: np.ndarray, settings, layers: list[int] | None = None,
               device: str = "auto", progress: Progress | None = None) -> PGARun:
    """Subspace PGA of your own states ``[L, N, d]`` (or ``[N, d]``) against your own W_U ``[V, d]``."""
    require(w_u.ndim == 2, f"The unembedding must be a [V, d] array; got shape {w_u.shape}.")
    states = validate_states(states, w_u.shape[1])
    layers = list(range(len(states))) if layers is None else list(layers)
    return PGARun(tuple(pga_sweep(states, readout_basis(w_u), settings, layers, device, progress)), settings)


def warm_pga(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, settings: PGASettings | None = None,
             compute: Compute = DEFAULT_COMPUTE, progress: Progress | None = None, states: Entry | None = None,
             slot: Callable[[], AbstractContextManager] = nullcontext, memory: EngineMemory | None = None) -> None:
    """Every layer's PCA in the engine's memory (``ready_pcas``: from the disk cache, else fitted and stored), so
    that the next :func:`model_pga` of these states, a preview above all, starts warm; arguments as
    :func:`model_pga`."""
    settings = settings or pga_settings(loaded.anatomy.d_model, seed=sampling.seed)
    entry = states or model_hidden_states(loaded, corpus, sampling, compute, progress)
    ready_pcas(entry.value.states, entry.provenance["spec"], settings, None, compute.device, progress=progress,
               slot=slot, memory=memory)


def ready_model_bases(loaded: LoadedModel, settings: PGASettings, compute: Compute = DEFAULT_COMPUTE,
                      slot: Callable[[], AbstractContextManager] = nullcontext,
                      memory: EngineMemory | None = None) -> None:
    """The candidate bases that :func:`model_pga` of ``settings`` projects onto, in the engine's memory
    (``ready_bases``), drawn inside ``slot``; arguments as :func:`model_pga`."""
    basis = model_readout(loaded, memory=memory)
    with slot() as pause:
        ready_bases(basis, settings, compute.device, memory, pause)


def model_triage(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, compute: Compute = DEFAULT_COMPUTE,
                 progress: Progress | None = None, cache: ResultCache | None = None,
                 states: Entry | None = None, slot: Callable[[], AbstractContextManager] = nullcontext,
                 preview: bool = False) -> TriageRun:
    """The verdict: PGA at the default k and CCR over every layer, the worst late layer at a deeper
    CCR, and epsilon, class and capacity of the embedding. The hidden states are read once (``states``:
    the entry when the caller already holds it); ``slot``: see :func:`cached_pga`. ``preview``: where the exact
    curve is not stored yet (and on a CPU), the verdict on its preview (``preview_settings``), without the deeper
    CCR: a first answer the exact verdict then replaces."""
    states = states or model_hidden_states(loaded, corpus, sampling, compute, progress, cache)
    settings = pga_settings(loaded.anatomy.d_model, seed=sampling.seed)
    quick = preview and needs_preview(compute.device)
    run = model_pga(loaded, corpus, sampling, settings, compute=compute, progress=progress, cache=cache, states=states,
                    slot=slot, stored_only=quick)
    if run is None:
        run = model_pga(loaded, corpus, sampling, preview_settings(settings, loaded.anatomy.d_model), compute=compute,
                        progress=progress, cache=cache, states=states, slot=slot)
    worst = None if run.preview else worst_late_layer(run.at())
    deeper = None
    if worst is not None:
        deeper_settings = pga_settings(loaded.anatomy.d_model, run.settings.ks, (TRIAGE_DEEPER_CCR,),
                                       seed=sampling.seed)
        deeper = model_pga(loaded, corpus, sampling, deeper_settings, [worst.layer], compute, progress, cache, states,
                           slot=slot)
    stats, _ = matrix_stats(loaded.ref, "embedding", compute.device, cache or default_cache())
    report = capacity_report(stats.d, clip_epsilon(stats.epsilon), SENSITIVITY_DELTA)
    summary = verdict(run.at(), deeper.at()[0] if deeper else None, report)
    return TriageRun(describe(loaded.ref), run, deeper, stats, summary)


def model_capacity(choice: ModelChoice, which: str = "embedding", bins: int = HISTOGRAM_BINS,
                   sample_pairs: int | None = None, seed: int = 0, device: str = "auto",
                   delta: float = SENSITIVITY_DELTA, progress: Progress | None = None,
                   cache: ResultCache | None = None, stored_only: bool = False,
                   preview: bool = False) -> CapacityRun | None:
    """epsilon, histogram, class and capacity of W_E (or W_U), reading only that tensor. ``stored_only``: None
    unless the histogram is cached; ``preview``: the exact statistics with a preview histogram (every pair among
    a few thousand random rows), for the page to draw while all pairs are counted."""
    return ref_capacity(resolve_choice(choice, weights=False), choice.label, which, bins, sample_pairs, seed, device,
                        delta, progress, cache, stored_only, preview)


def measure_published(name: str, device: str = "auto", cache: ResultCache | None = None) -> Measured:
    """epsilon of one of the paper's 45 published models (by Hub id or printed name), measured here from its
    embedding tensor alone (its shard, not the model), beside the published value."""
    published = find_published(name)
    require(published is not None, f"{name!r} is not one of the {len(published_models())} published models; "
                                   "give a Hub id or a name of the capacity atlas (python -m analysis atlas).")
    ref = resolve_choice(ModelChoice(published.hub_id), weights=False)
    stats, _ = matrix_stats(ref, "embedding", device, cache)
    return Measured(published, stats.epsilon, ref.identity)


def ref_capacity(ref: ModelRef, label: str, which: str = "embedding", bins: int = HISTOGRAM_BINS,
                 sample_pairs: int | None = None, seed: int = 0, device: str = "auto",
                 delta: float = SENSITIVITY_DELTA, progress: Progress | None = None,
                 cache: ResultCache | None = None, stored_only: bool = False,
                 preview: bool = False) -> CapacityRun | None:
    """:func:`model_capacity` of a resolved reference. epsilon is clipped into the formulas' domain in
    one place (``clip_epsilon``)."""
    if preview:
        geometry = matrix_preview(ref, which, bins, seed, device, cache)
        preview = geometry.histogram.sampled is not None  # a small matrix's preview is its exact histogram
    else:
        geometry = matrix_geometry(ref, which, bins, sample_pairs, seed, device, progress, cache, stored_only)
        if geometry is None:
            return None
    report = capacity_report(geometry.stats.d, clip_epsilon(geometry.stats.epsilon), delta)
    return CapacityRun(label, ref.identity, geometry, report, preview)


def model_report(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, compute: Compute = DEFAULT_COMPUTE,
                 progress: Progress | None = None, cache: ResultCache | None = None) -> ModelReport:
    """The triage report: the verdict, every layer at CCR 1, 5 and 10, the embedding's histogram and capacity."""
    triage = model_triage(loaded, corpus, sampling, compute, progress, cache)
    settings = pga_settings(loaded.anatomy.d_model, triage.pga.settings.ks, REPORT_CCRS, seed=sampling.seed)
    depth = model_pga(loaded, corpus, sampling, settings, compute=compute, progress=progress, cache=cache)
    capacity = ref_capacity(loaded.ref, loaded.ref.label, device=compute.device, progress=progress, cache=cache)
    return ModelReport(triage, depth, capacity, corpus.name, corpus.sha256, library_versions())


def paired_cosines(choice: ModelChoice, bins: int = HISTOGRAM_BINS, cache: ResultCache | None = None):
    """Histogram of each token's cos(E_i, U_i), or None for a tied model (all ones)."""
    return embedding_unembedding_cosines(resolve_choice(choice, weights=False), bins, cache)


def formula_capacity(d: int, eps: float, delta: float = SENSITIVITY_DELTA) -> CapacityReport:
    """Capacity at a given (d, epsilon), no model: epsilon must already be in (0, 1]."""
    return capacity_report(d, eps, delta)


def checkpoint_series(name: str, revisions: list[str] | None, corpus: Corpus, sampling: Sampling,
                      ks: tuple[int, ...] | None = None, ccrs: tuple[int, ...] = (DEFAULT_CCR,),
                      n_null: int = DEFAULT_N_NULL, compute: Compute = DEFAULT_COMPUTE,
                      progress: Progress | None = None, cache: ResultCache | None = None,
                      store: ResultStore | None = None, stored_only: bool = False,
                      preview: bool = False) -> CheckpointSeries | None:
    """PGA and held-out loss per checkpoint (``revisions`` None: every checkpoint), duplicates flagged;
    k defaults to d / 4 (at most 100) of the final checkpoint chosen. ``stored_only``: None unless every
    checkpoint's record is stored. ``preview``: on ``preview_settings``, from each checkpoint's cached
    hidden states alone (no model loaded, nothing stored); None when one has none yet."""
    revisions = [c.revision for c in list_checkpoints(name)] if revisions is None else revisions
    require(len(revisions) >= 1, f"No checkpoints chosen for {name!r}; pick at least one.")
    d = model_card(ModelChoice(name, revisions[-1] or None))["d_model"]
    settings = pga_settings(d, ks, ccrs, n_null, sampling.seed)
    if preview:
        settings = preview_settings(settings, d)
    return training_sweep(name, revisions, corpus, sampling, settings, compute.device, progress, cache, store,
                          compute.dtype, stored_only)


def prepare_series(name: str, revisions: list[str], corpus: Corpus, sampling: Sampling,
                   compute: Compute = DEFAULT_COMPUTE, progress: Progress | None = None,
                   cache: ResultCache | None = None) -> None:
    """Each checkpoint's hidden states and readout basis cached, loading those that miss one (not the held-out loss,
    which the exact series measures): then :func:`checkpoint_series` can preview the series (``preview=True``)
    with no model loaded."""
    prepare_checkpoints(name, revisions, corpus, sampling, compute.device, compute.dtype, progress, cache)


def checkpoint_list(name: str) -> list[dict]:
    """Each checkpoint's ``step``, ``revision``, ``identity`` and ``duplicate_of`` (the first earlier
    checkpoint with the same weights, or None): a copied or mislabelled checkpoint shows here."""
    first_with: dict[str, str] = {}
    listed = []
    for checkpoint in list_checkpoints(name):
        ref = resolve(name, checkpoint.revision, allow_pickle=True, weights=False)
        fingerprint = weights_fingerprint(ref)
        listed.append({"step": checkpoint.step, "revision": checkpoint.revision, "identity": ref.identity,
                       "duplicate_of": first_with.get(fingerprint) if fingerprint else None})
        if fingerprint:
            first_with.setdefault(fingerprint, checkpoint.revision)
    return listed


def model_convergence(a: ModelChoice, b: ModelChoice, corpus: Corpus, units: int = CONVERGENCE_UNITS,
                      k: int | None = None, n_null: int = CONVERGENCE_N_NULL, seed: int = 0,
                      compute: Compute = DEFAULT_COMPUTE, progress: Progress | None = None,
                      cache: ResultCache | None = None) -> ConvergenceRun:
    """Do two references (each with its revision) arrange the same passages alike? Each model is
    loaded in turn, pooled, and released. k defaults to the smaller of the two ``default_k``."""
    texts = text_chunks(corpus.text, units)
    pooled, bases, identities = [], [], []
    for choice in (a, b):
        loaded = open_model(choice, compute, progress)
        try:
            pooled.append(model_pooled(loaded, texts, progress=progress, cache=cache))
            bases.append(model_readout(loaded, cache))
            identities.append(loaded.ref.identity)
        finally:
            del loaded
            free_memory()
    k = k or min(default_k(p.shape[2]) for p in pooled)
    k = min(k, pooled[0].shape[2], pooled[1].shape[2])
    results = convergence(pooled[0], pooled[1], bases[0], bases[1], k, n_null, seed)
    return ConvergenceRun(a.label, b.label, tuple(identities), len(texts), k, n_null, len(pooled[0]), results)


def model_probes(loaded: LoadedModel, data: Labelled, seed: int = 0, pga: PGARun | None = None,
                 progress: Progress | None = None, cache: ResultCache | None = None,
                 preview: bool = False, stored_only: bool = False) -> ProbeRun | None:
    """Held-out probe accuracy per layer on mean-pooled states, beside ``pga``'s z when given. ``preview``: on
    a seeded subset of the texts (``preview_texts``), seconds instead of a minute, for the page to draw first;
    ``stored_only``: None unless every text's pooled states are cached. A subset that misses a class (fewer than
    two texts of it) or holds every text is no preview: all texts are pooled."""
    chosen = [data.labels[i] for i in preview_texts(len(data.texts), seed)]
    if preview:
        counts = Counter(chosen)
        preview = len(chosen) < len(data.texts) and counts.keys() == set(data.labels) and min(counts.values()) >= 2
    pooled = model_pooled(loaded, data.texts, progress=progress, cache=cache, seed=seed, preview=preview,
                          stored_only=stored_only)
    if pooled is None:
        return None
    labels = chosen if preview else data.labels
    result = probe_layers(pooled, labels, seed=seed)
    return ProbeRun(loaded.ref.label, loaded.ref.identity, data.name, result, pga,
                    len(data.texts) if preview else None)


def model_token_map(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, layer: int, ccr: int,
                    k: int | None = None, compute: Compute = DEFAULT_COMPUTE, progress: Progress | None = None,
                    cache: ResultCache | None = None, preview: bool = False,
                    stored_only: bool = False) -> TokenMapRun | None:
    """UMAP of one layer after CCR (seeded by the sampling's seed), with each point's token and
    context; the map is cached by states, layer, CCR, k and seed. ``preview``: the top-two-PC plane
    instead (computed, not cached); ``stored_only``: None when the UMAP is not cached."""
    cache = cache or default_cache()
    entry = model_hidden_states(loaded, corpus, sampling, compute, progress, cache)
    hidden, basis = entry.value, model_readout(loaded, cache)
    k = k or default_k(basis.d)
    states = hidden.layer(layer)
    layer = layer % hidden.n_layers
    spec = {"states": entry.provenance["spec"], "readout": loaded.spec, "layer": layer, "ccr": ccr, "k": k,
            "seed": sampling.seed}
    if preview:
        mapped = token_map(states, basis.top(k), ccr, sampling.seed, method="pca")
    elif stored_only:
        hit = cache.get("token-map", TOKEN_MAP_VERSION, spec, TOKEN_MAP_SHAPE)
        if hit is None:
            return None
        mapped = hit.value
    else:
        mapped = cache.get_or_compute("token-map", TOKEN_MAP_VERSION, spec,
                                      lambda: token_map(states, basis.top(k), ccr, sampling.seed, progress=progress),
                                      TOKEN_MAP_SHAPE).value
    sample, tokenizer = hidden.sample, loaded.tokenizer
    tokens = [tokenizer.decode([int(t)]) for t in sample.token_ids]
    contexts = [tokenizer.decode(sample.windows[r, max(0, c - 8):c + 1].tolist())
                for r, c in zip(sample.rows, sample.cols, strict=True)]
    return TokenMapRun(mapped["coords"], mapped["pc1"], mapped["share_in_readout"], tokens, contexts,
                       [token_class(t) for t in tokens], layer, ccr, k, sampling.seed, preview)
