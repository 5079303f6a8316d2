"""The cached chains a user's choice runs through.

Subspace PGA: model -> hidden states -> readout basis -> PGA results per (layer, k, CCR depth).
Capacity: the stored W_E (or W_U) -> cosine statistics and histogram (no model loaded).

Each step is stored in the disk cache under a spec that holds the step's own settings and the spec
of what it was computed from, so a result is never confused with one from other weights, text or
settings. PGA results are cached per (layer, k, CCR depth): moving a slider computes one new entry.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

import numpy as np

from analysis.activations.hidden import HiddenStates
from analysis.activations.pooling import pooled_states
from analysis.capacity.epsilon import (
    PREVIEW_ROWS,
    CosineStats,
    Histogram,
    MatrixGeometry,
    cosine_histogram,
    cosine_stats,
    paired_cosines,
    rows_histogram,
)
from analysis.cores import WORKERS
from analysis.geometry.pga import (
    PCA_KEPT,
    FittedPCA,
    LayerPGA,
    LayerShape,
    PGASettings,
    check_layers,
    fit_layer_pcas,
    pga_sweep,
    remember_fitted,
    remembered_shapes,
)
from analysis.geometry.readout import ReadoutBasis, readout_basis
from analysis.models import arch
from analysis.models.loading import LoadedModel
from analysis.models.refs import ModelRef
from analysis.models.weights import StoredMatrix, read_matrix
from analysis.progress import Progress, report
from analysis.storage.cache import ResultCache, default_cache, spec_key
from analysis.storage.memory import EngineMemory, default_memory
from analysis.storage.shapes import OneOf

READOUT_VERSION = 2
PGA_VERSION = 2  # 2: null draws seeded per draw, nested in k (`null_bases`)


def model_readout(loaded: LoadedModel, cache: ResultCache | None = None,
                  memory: EngineMemory | None = None) -> ReadoutBasis:
    """The readout basis of the loaded model's W_U, cached by model identity and dtype (W_U is read
    as loaded: a bfloat16 model's W_U is rounded), and remembered in ``memory`` (a page asks for it once
    per layer of a preview)."""
    cache = cache or default_cache()
    spec = {"model": loaded.spec}
    key = f"{cache.directory}|{spec_key('readout', READOUT_VERSION, spec)}"
    return (memory or default_memory()).remember("readout", key, lambda: cache.get_or_compute(
        "readout", READOUT_VERSION, spec,
        lambda: readout_basis(arch.unembedding(loaded.model).detach(), device=loaded.device), ReadoutBasis,
    ).value)


def stored_readout(model: dict, cache: ResultCache) -> ReadoutBasis | None:
    """The cached readout basis of ``model`` (a ``LoadedModel.spec``), or None: nothing is loaded."""
    hit = cache.get("readout", READOUT_VERSION, {"model": model}, ReadoutBasis)
    return None if hit is None else hit.value


def holds_readout(model: dict, cache: ResultCache) -> bool:
    """Whether the readout basis of ``model`` is cached: the key looked up, nothing read."""
    return cache.holds("readout", READOUT_VERSION, {"model": model})


def _preview(states: np.ndarray, spec: Callable[[int, int, int], dict], basis: ReadoutBasis, settings: PGASettings,
             layers: list[int], device: str, progress: Progress | None,
             slot: Callable[[], AbstractContextManager], memory: EngineMemory, states_key: str,
             until: float | None = None) -> list[LayerPGA]:
    """A preview of ``layers``, in :func:`cached_pga`'s order: the layers remembered in memory (a background
    task previews the next moves) and every other layer inside one ``slot``, in the order given, each remembered as
    soon as it is done (a move to the setting a stopped preview ahead had started finds its finished layers).
    ``until``: a ``time.monotonic()`` past which no layer is started; the layers not done are left out (past it
    already: the remembered layers, the slot not taken). Remembered,
    never stored on disk: the exact run replaces it."""
    keys = _preview_keys(spec, settings, layers)
    remembered = {w: memory.get("preview", key) for w, key in keys.items()}
    found = {w: result for w, result in remembered.items() if result is not None}
    missing = list(dict.fromkeys(layer for layer, k, c in keys if (layer, k, c) not in found))
    if missing and (until is None or time.monotonic() <= until):
        report(progress, "Preview", 0, 1)
        with slot() as pause:
            for number, layer in enumerate(missing):
                if until is not None and time.monotonic() > until:
                    break
                if number and pause is not None:
                    pause()
                for r in pga_sweep(states, basis, settings, [layer], device, pause=pause, memory=memory,
                                   states_key=states_key):
                    found[r.layer, r.k, r.ccr] = memory.put("preview", keys[r.layer, r.k, r.ccr], r)
        report(progress, "Preview", 1, 1)
    return [found[w] for w in keys if w in found]


def _preview_keys(spec: Callable[[int, int, int], dict], settings: PGASettings, layers: list[int]) -> dict[tuple, str]:
    """The engine memory's key of each (layer, k, CCR) of a preview."""
    return {(layer, k, c): spec_key("pga-preview", PGA_VERSION, spec(layer, k, c))
            for layer in layers for k in settings.ks for c in settings.ccrs}


def _remembered_preview(spec: Callable[[int, int, int], dict], settings: PGASettings, layers: list[int],
                        memory: EngineMemory) -> list[LayerPGA] | None:
    """The preview of ``layers`` when every (layer, k, CCR) of it is remembered, else None (nothing is computed)."""
    found = [memory.get("preview", key) for key in _preview_keys(spec, settings, layers).values()]
    return None if any(result is None for result in found) else found


PCA_VERSION = 1


def ready_pcas(states: np.ndarray, states_spec: dict, settings: PGASettings, layers: list[int] | None = None,
               device: str = "auto", cache: ResultCache | None = None, progress: Progress | None = None,
               slot: Callable[[], AbstractContextManager] = nullcontext, memory: EngineMemory | None = None) -> None:
    """Each layer's PCA of ``states`` (all layers by default) in the engine's ``memory``: read from the disk
    cache (a restarted app previews at once), else fitted inside ``slot`` and stored. No cache lock is held
    meanwhile: two processes may fit the same PCA, never wait for each other."""
    cache, memory = cache or default_cache(), memory or default_memory()
    layers = list(range(len(states))) if layers is None else [layer % len(states) for layer in layers]
    missing = []  # (layer, spec, key) of the layers neither remembered nor stored
    for layer in layers:
        spec = {"states": states_spec, "layer": layer, "ccr_fit": settings.ccr_fit, "kept": PCA_KEPT,
                "seed": settings.seed if settings.ccr_fit == "half" else None}
        key = spec_key("layer-pca", PCA_VERSION, spec)
        if memory.get("pca ready", key):
            continue
        hit = cache.get("layer-pca", PCA_VERSION, spec, FittedPCA)
        if hit is None or not remember_fitted(states, layer, settings, hit.value, device, memory):
            missing.append((layer, spec, key))
        else:
            memory.put("pca ready", key, True)
    for first in range(0, len(missing), WORKERS):  # a layer per core, each group inside the slot
        report(progress, "Preparing layers", first, len(missing))
        group = missing[first:first + WORKERS]
        with slot():
            fitted = fit_layer_pcas(states, [layer for layer, _, _ in group], settings, device, memory)
        for (_, spec, key), pca in zip(group, fitted, strict=True):
            cache.put("layer-pca", PCA_VERSION, spec, pca)
            memory.put("pca ready", key, True)
    if missing:
        report(progress, "Preparing layers", len(missing), len(missing))


def _stored_pga(cache: ResultCache, spec: Callable[[int, int, int], dict], layer: int, settings: PGASettings,
                found: dict[tuple, LayerPGA]) -> tuple[set[int], set[int]]:
    """Put ``layer``'s stored results into ``found``; return the ks and CCR depths that miss one."""
    missing_k, missing_c = set(), set()
    for k in settings.ks:
        for c in settings.ccrs:
            hit = cache.get("pga", PGA_VERSION, spec(layer, k, c), LayerPGA)
            if hit is None:
                missing_k.add(k)
                missing_c.add(c)
            else:
                found[layer, k, c] = hit.value
    return missing_k, missing_c


def _pga_spec(states_spec: dict, basis_spec: dict, settings: PGASettings) -> Callable[[int, int, int], dict]:
    """The disk cache's spec of one (layer, k, CCR) result of ``settings`` on these states and readout basis."""
    common = {k: v for k, v in settings.spec.items() if k not in ("ks", "ccrs")}
    return lambda layer, k, ccr: {"states": states_spec, "readout": basis_spec, "layer": layer, "k": k, "ccr": ccr,
                                  **common}


def pga_stored(states_spec: dict, basis_spec: dict, settings: PGASettings, layers: list[int],
               cache: ResultCache | None = None) -> bool:
    """Whether :func:`cached_pga` would find every (layer, k, CCR) of ``settings`` in the disk cache: the keys looked
    up, nothing read (reading the 31 layers of one setting takes ~0.25 s)."""
    cache = cache or default_cache()
    return _holds(cache, _pga_spec(states_spec, basis_spec, settings), settings, layers)


def _holds(cache: ResultCache, spec: Callable[[int, int, int], dict], settings: PGASettings,
           layers: list[int]) -> bool:
    """Whether the disk cache holds every (layer, k, CCR) of ``settings`` at ``layers``: the keys looked up only."""
    return all(cache.holds("pga", PGA_VERSION, spec(layer, k, c))
               for layer in layers for k in settings.ks for c in settings.ccrs)


def stored_pga_layers(states_spec: dict, basis_spec: dict, settings: PGASettings, layers: list[int],
                      cache: ResultCache | None = None) -> list[LayerPGA]:
    """:func:`cached_pga`'s results at those of ``layers`` whose every (k, CCR) is in the disk cache, nothing
    computed: an exact run's layers stored so far, while it runs (the layers missing one are not read)."""
    cache, spec, found = cache or default_cache(), _pga_spec(states_spec, basis_spec, settings), {}
    for layer in layers:
        if _holds(cache, spec, settings, [layer]):
            _stored_pga(cache, spec, layer, settings, found)
    return [found[w] for w in itertools.product(layers, settings.ks, settings.ccrs) if w in found]


def _states_key(states_spec: dict) -> str:
    """The name of the hidden states of ``states_spec`` in the engine's memory: each layer hashed once."""
    return spec_key("states", 1, states_spec)


def layer_shapes(states: np.ndarray, states_spec: dict, basis: ReadoutBasis, settings: PGASettings,
                 layers: list[int], device: str = "auto", memory: EngineMemory | None = None) -> list[LayerShape]:
    """:func:`remembered_shapes` of these states (named as :func:`cached_pga` names them) at ``layers``."""
    return remembered_shapes(states, basis, settings, layers, device, memory, _states_key(states_spec))


def cached_pga(states: HiddenStates | np.ndarray, states_spec: dict, basis: ReadoutBasis, basis_spec: dict,
               settings: PGASettings, layers: list[int], device: str = "auto",
               progress: Progress | None = None, cache: ResultCache | None = None, stored_only: bool = False,
               slot: Callable[[], AbstractContextManager] = nullcontext,
               memory: EngineMemory | None = None, for_previews: int = 0,
               until: float | None = None) -> list[LayerPGA] | None:
    """PGA for ``layers`` x ``settings.ks`` x ``settings.ccrs``, each (layer, k, ccr) cached on its own.

    ``stored_only``: return None instead of computing when anything is missing (a preview: when anything is not
    remembered). ``slot``: a context
    held while each layer computes (the dashboard's one-heavy-computation-at-a-time gate); its value, when
    not None, is the ``pause`` handed to :func:`pga_sweep`. A layer's results are stored as soon as it is
    done, so work that is stopped keeps every finished layer.
    Preview settings (``settings.preview``): see :func:`_preview` (a second or two; remembered in memory, never
    stored on disk; ``until``: as there, the layers previewed by then). ``memory``: the engine's (PCAs, bases,
    previews; default: the process's). ``for_previews``: see :func:`pga_sweep`."""
    cache, memory = cache or default_cache(), memory or default_memory()
    array = states.states if isinstance(states, HiddenStates) else states
    check_layers(layers, len(array))
    layers = [layer % len(array) for layer in layers]
    spec = _pga_spec(states_spec, basis_spec, settings)
    states_key = _states_key(states_spec)

    if settings.preview:
        if stored_only:
            return _remembered_preview(spec, settings, layers, memory)
        if until is None or time.monotonic() <= until:  # else nothing is computed
            ready_pcas(array, states_spec, settings, layers, device, cache, slot=slot, memory=memory)
        return _preview(array, spec, basis, settings, layers, device, progress, slot, memory, states_key, until)

    found: dict[tuple, LayerPGA] = {}
    computed = False
    for number, layer in enumerate(layers):
        missing_k, missing_c = _stored_pga(cache, spec, layer, settings, found)
        if missing_k and stored_only:
            return None
        if missing_k:
            report(progress, "PGA by layer", number, len(layers))  # counts layers, not each layer's inner steps
            ready_pcas(array, states_spec, settings, [layer], device, cache, slot=slot, memory=memory)
            computed = True
            fresh = replace(settings, ks=tuple(sorted(missing_k)), ccrs=tuple(sorted(missing_c)))
            with slot() as pause:
                results = pga_sweep(array, basis, fresh, [layer], device, pause=pause, memory=memory,
                                    for_previews=for_previews, states_key=states_key)
            for result in results:
                cache.put("pga", PGA_VERSION, spec(result.layer, result.k, result.ccr), result)
                found[result.layer, result.k, result.ccr] = result
    if computed:
        report(progress, "PGA by layer", len(layers), len(layers))
    return [found[layer, k, c] for layer in layers for k in settings.ks for c in settings.ccrs]


GEOMETRY_VERSION = 2  # 2: MatrixGeometry lives in analysis.capacity.epsilon


def matrix_geometry(ref: ModelRef, which: str = "embedding", bins: int = 300, sample_pairs: int | None = None,
                    seed: int = 0, device: str = "auto", progress: Progress | None = None,
                    cache: ResultCache | None = None, stored_only: bool = False) -> MatrixGeometry | None:
    """epsilon statistics and the histogram of W_E or W_U, reading only that tensor; cached (``stored_only``:
    None unless it is)."""
    cache = cache or default_cache()
    spec = {"model": ref.spec, "which": which, "bins": bins, "sample_pairs": sample_pairs, "seed": seed}
    if stored_only:
        entry = cache.get("matrix-geometry", GEOMETRY_VERSION, spec, MatrixGeometry)
        return None if entry is None else entry.value

    def compute() -> MatrixGeometry:
        stored = read_matrix(ref, which)
        stats, _ = matrix_stats(ref, which, device, cache, stored)  # cached: the page's preview has them already
        return MatrixGeometry(which, stats, cosine_histogram(stored.matrix, bins, sample_pairs, seed, device, progress),
                              stored.tied_embeddings, stored.model_type, stored.tensor_name)

    return cache.get_or_compute("matrix-geometry", GEOMETRY_VERSION, spec, compute, MatrixGeometry).value


def matrix_preview(ref: ModelRef, which: str = "embedding", bins: int = 300, seed: int = 0, device: str = "auto",
                   cache: ResultCache | None = None) -> MatrixGeometry:
    """:func:`matrix_geometry` with the exact statistics (cached) and a preview histogram, every pair among
    ``PREVIEW_ROWS`` random rows (``rows_histogram``, not cached): seconds, drawn while all pairs are counted.
    A matrix of at most that many rows gets its exact histogram at once (its ``sampled`` is None)."""
    stored = read_matrix(ref, which)
    if len(stored.matrix) <= PREVIEW_ROWS:
        return matrix_geometry(ref, which, bins, None, seed, device, cache=cache)
    stats, _ = matrix_stats(ref, which, device, cache, stored)
    return MatrixGeometry(which, stats, rows_histogram(stored.matrix, bins, PREVIEW_ROWS, seed, device),
                          stored.tied_embeddings, stored.model_type, stored.tensor_name)


def matrix_stats(ref: ModelRef, which: str = "embedding", device: str = "auto",
                 cache: ResultCache | None = None, stored: StoredMatrix | None = None) -> tuple[CosineStats, bool]:
    """(closed-form cosine statistics, tied) of W_E or W_U alone: seconds even for a 50k vocabulary. ``stored``:
    the tensor when the caller has read it."""
    cache = cache or default_cache()

    def compute():
        matrix = stored or read_matrix(ref, which)
        return cosine_stats(matrix.matrix, device), matrix.tied_embeddings

    return cache.get_or_compute("matrix-stats", GEOMETRY_VERSION, {"model": ref.spec, "which": which},
                                compute, (CosineStats, bool)).value


def embedding_unembedding_cosines(ref: ModelRef, bins: int = 300, cache: ResultCache | None = None):
    """Histogram of cos(E_i, U_i) over tokens, or None for tied models (all ones); cached."""
    cache = cache or default_cache()

    def compute() -> Histogram | None:
        embedding, unembedding = read_matrix(ref, "embedding"), read_matrix(ref, "unembedding")
        if embedding.tied_embeddings:
            return None
        rows = min(len(embedding.matrix), len(unembedding.matrix))  # padded vocabularies may differ
        values = paired_cosines(embedding.matrix[:rows], unembedding.matrix[:rows])
        counts, edges = np.histogram(values, bins=bins, range=(-1, 1))
        return Histogram(edges, counts)

    return cache.get_or_compute("paired-cosines", GEOMETRY_VERSION, {"model": ref.spec, "bins": bins},
                                compute, OneOf((Histogram, None))).value


POOLED_VERSION = 2
PREVIEW_TEXTS = 64  # texts pooled for the probes' preview: a quarter of the built-in tasks, ~5 s on 2 cores


def preview_texts(n_texts: int, seed: int = 0) -> np.ndarray:
    """The sorted indices of the (at most) ``PREVIEW_TEXTS`` seeded random texts a preview pools first."""
    return np.sort(np.random.default_rng([seed, n_texts]).permutation(n_texts)[:PREVIEW_TEXTS])


def _pooled(loaded: LoadedModel, texts: list[str], max_tokens: int, progress: Progress | None,
            cache: ResultCache, stored_only: bool) -> np.ndarray | None:
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    spec = {"model": loaded.spec, "texts": digest, "n_texts": len(texts), "max_tokens": max_tokens}
    if stored_only:
        entry = cache.get("pooled", POOLED_VERSION, spec, np.ndarray)
        return None if entry is None else entry.value
    return cache.get_or_compute("pooled", POOLED_VERSION, spec,
                                lambda: pooled_states(loaded, texts, max_tokens, progress=progress), np.ndarray).value


def model_pooled(loaded: LoadedModel, texts: list[str], max_tokens: int = 64, progress: Progress | None = None,
                 cache: ResultCache | None = None, seed: int = 0, preview: bool = False,
                 stored_only: bool = False) -> np.ndarray | None:
    """``[n_layers + 1, len(texts), d]`` mean-pooled states of the texts; ``preview``: of the texts
    ``preview_texts(len(texts), seed)`` only. Cached in two parts, those texts and the rest, so that the
    whole after a preview pools each text once (``stored_only``: None unless it is cached)."""
    cache = cache or default_cache()
    first = preview_texts(len(texts), seed)
    pooled_first = _pooled(loaded, [texts[i] for i in first], max_tokens, progress, cache, stored_only)
    if preview or pooled_first is None:
        return pooled_first
    rest = np.setdiff1d(np.arange(len(texts)), first)
    out = np.empty((pooled_first.shape[0], len(texts), pooled_first.shape[2]), np.float32)
    out[:, first] = pooled_first
    if len(rest):
        pooled_rest = _pooled(loaded, [texts[i] for i in rest], max_tokens, progress, cache, stored_only)
        if pooled_rest is None:
            return None
        out[:, rest] = pooled_rest
    return out
