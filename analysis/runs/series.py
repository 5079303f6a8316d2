"""A model across its training checkpoints: per-layer metrics and loss per checkpoint, each cached on
its own (an interrupted sweep resumes where it stopped), and checkpoints whose weights are
identical to another's flagged, so a flat curve is never mistaken for a finding.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import time
from collections.abc import Iterator

import torch

from analysis.activations.hidden import (
    hidden_states,
    holds_hidden_states,
    stored_hidden_states,
    token_sample,
    tokenised_corpus,
)
from analysis.activations.loss import heldout_windows, mean_loss
from analysis.data.corpus import Corpus, Sampling, bos_token
from analysis.errors import InputError, require
from analysis.geometry.pga import LayerPGA, PGASettings
from analysis.models.card import describe
from analysis.models.devices import dtype_name, pick_device, pick_dtype
from analysis.models.hub import published_weight_hashes
from analysis.models.loading import LoadedModel, load
from analysis.models.refs import ModelRef, hash_files, list_checkpoints, resolve, weight_files
from analysis.progress import Progress, report
from analysis.results.collections import CheckpointResult, CheckpointSeries, flag_duplicates
from analysis.runs.pipeline import cached_pga, holds_readout, model_readout, stored_readout
from analysis.runs.settings import Compute
from analysis.storage.cache import ResultCache, canonical_json, default_cache
from analysis.storage.shapes import OneOf, record_shape
from analysis.storage.store import ResultStore

SERIES_NAMESPACE = "checkpoint"
SERIES_VERSION = 4  # 4: PGA's null draws nested in k (PGA_VERSION 2)
LOSS_VERSION = 1
LOSS_WINDOWS = 16
CHECKPOINT_KEYS = ("model", "revision", "step")  # what differs between the checkpoints of one series
# The value of a checkpoint record (:func:`checkpoint_record`), as readers of the store check it.
CHECKPOINT_RECORD = {"name": str, "revision": OneOf((str, None)), "step": OneOf((int, None)), "identity": str,
                     "fingerprint": OneOf((str, None)), "layers": [record_shape(LayerPGA)], "loss": float,
                     "seconds": dict}


def weights_fingerprint(ref: ModelRef) -> str | None:
    """A hash of the weights alone: the Hub's published file hashes, else the files' contents."""
    if ref.kind == "hub":
        published = published_weight_hashes(ref.name, ref.identity)
        if published:
            return "hub:" + published
    if ref.gguf_file:
        return ref.identity
    return "sha256:" + hash_files(weight_files(ref.path, allow_pickle=True, name=ref.name))


def check_series(name: str, revisions: list[str], weights: bool = True, allow_pickle: bool = False) -> list[ModelRef]:
    """Resolve every revision, listing all problems at once: missing revisions and mixed architectures.

    ``weights=False`` fetches only a Hub model's config files (``analysis.runs.sweep`` fetches the rest)."""
    require(len(revisions) >= 1, f"No checkpoints chosen for {name!r}; pick at least one.")
    available = {c.revision for c in list_checkpoints(name)}
    refs, problems = [], []
    for revision in revisions:
        try:
            refs.append(resolve(name, revision or None, allow_pickle, weights))
        except InputError as error:
            problems.append(str(error))
    if available and problems:
        problems.append(f"{name!r} has {len(available)} checkpoints.")
    require(not problems, " ".join(problems))
    shapes = {}
    for ref in refs:
        info = describe(ref)
        shapes.setdefault((info["model_type"], info["n_layers"], info["d_model"]), []).append(ref.revision or name)
    if len(shapes) > 1:
        raise InputError("The checkpoints differ in architecture: " + "; ".join(
            f"{kind} with {layers} layers, d = {d}: {', '.join(revs)}" for (kind, layers, d), revs in shapes.items()))
    return refs


def checkpoint_spec(ref: ModelRef, dtype: str, corpus: Corpus, sampling: Sampling, settings: PGASettings) -> dict:
    """Everything a checkpoint's record depends on: weights, dtype, text, sampling and settings, and
    which checkpoint it is (revision, step), so two checkpoints with the same weights keep a record each."""
    return {"model": ref.spec, "revision": ref.revision, "step": ref.step, "dtype": dtype, "corpus": corpus.spec,
            "sampling": sampling.spec, "settings": settings.spec, "loss_windows": LOSS_WINDOWS}


def loss_spec(model: dict, corpus: Corpus, sampling: Sampling) -> dict:
    """The cache key of a checkpoint's held-out loss (``model``: a ``LoadedModel.spec``)."""
    return {"model": model, "corpus": corpus.spec, "sampling": sampling.spec, "windows": LOSS_WINDOWS}


def checkpoint_record(ref: ModelRef, dtype: str, device: str, layers: list, loss: float, seconds: dict) -> dict:
    """A checkpoint's record as plain JSON: ``{"name", "revision", "step", "identity", "fingerprint", "dtype",
    "device", "layers", "loss", "seconds"}``."""
    return {"name": ref.name, "revision": ref.revision, "step": ref.step, "identity": ref.identity,
            "fingerprint": weights_fingerprint(ref), "dtype": dtype, "device": device,
            "layers": [layer.to_record() for layer in layers], "loss": float(loss),
            "seconds": {name: round(value, 3) for name, value in seconds.items()}}


def measure_checkpoint(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, settings: PGASettings,
                       cache: ResultCache, progress: Progress | None = None) -> dict:
    """A loaded checkpoint's per-layer PGA (every k and CCR depth of ``settings``) and held-out loss, as a
    :func:`checkpoint_record`. Hidden states, per-layer results and the loss go through ``cache``."""
    timings = {}
    start = time.perf_counter()
    compute = Compute(str(loaded.device), dtype_name(loaded.dtype))
    entry = hidden_states(loaded, corpus, sampling, compute.batch_size, progress, cache)
    timings["forward"] = time.perf_counter() - start
    start = time.perf_counter()
    layers = cached_pga(entry.value, entry.provenance["spec"], model_readout(loaded, cache), loaded.spec, settings,
                        list(range(entry.value.n_layers)), compute.device, progress, cache)
    timings["metrics"] = time.perf_counter() - start
    start = time.perf_counter()
    loss = heldout_loss(loaded, corpus, sampling, cache)
    timings["loss"] = time.perf_counter() - start
    return checkpoint_record(loaded.ref, dtype_name(loaded.dtype), str(loaded.device), layers, loss, timings)


def heldout_loss(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, cache: ResultCache) -> float:
    """The mean next-token loss on ``LOSS_WINDOWS`` windows of the text outside the sampled positions (cached)."""
    def measured() -> float:
        sample = token_sample(loaded, corpus, sampling, cache)
        windows = heldout_windows(tokenised_corpus(loaded, corpus, cache), sample, sampling, LOSS_WINDOWS,
                                  bos_token(loaded.tokenizer))
        return float(mean_loss(loaded, windows))

    return cache.get_or_compute("loss", LOSS_VERSION, loss_spec(loaded.spec, corpus, sampling), measured, float).value


def record_from_cache(ref: ModelRef, dtype: str, device: str, corpus: Corpus, sampling: Sampling,
                      settings: PGASettings, cache: ResultCache, progress: Progress | None = None) -> dict | None:
    """The :func:`measure_checkpoint` record with no model loaded, from the checkpoint's cached hidden states,
    readout basis and loss (PGA computed, and cached, where missing); None when any of the three is missing. A preview
    (``settings.preview``) needs no loss: NaN until the exact series measures it."""
    model = {**ref.spec, "dtype": dtype}
    entry = stored_hidden_states(model, corpus, sampling, cache)
    basis = stored_readout(model, cache)
    loss = cache.get("loss", LOSS_VERSION, loss_spec(model, corpus, sampling), float)
    if entry is None or basis is None or (loss is None and not settings.preview):
        return None
    start = time.perf_counter()
    layers = cached_pga(entry.value, entry.provenance["spec"], basis, model, settings,
                        list(range(entry.value.n_layers)), device, progress, cache)
    return checkpoint_record(ref, dtype, str(pick_device(device)), layers, math.nan if loss is None else loss.value,
                             {"metrics": time.perf_counter() - start})


def prepare_checkpoints(name: str, revisions: list[str], corpus: Corpus, sampling: Sampling, device: str = "auto",
                        dtype: str = "auto", progress: Progress | None = None,
                        cache: ResultCache | None = None) -> None:
    """Into ``cache``, what a preview of the series reads with no model loaded (:func:`record_from_cache`): each
    checkpoint's hidden states and readout basis (not its held-out loss, which the exact series measures: 16 more
    windows through the model, a third of the forward pass at N = 512). A checkpoint that misses one is loaded, in
    turn; the others are not, and nothing of theirs is read (their keys are looked up)."""
    cache = cache or default_cache()
    refs = check_series(name, revisions)
    concrete = dtype_name(pick_dtype(dtype, pick_device(device)))
    for number, ref in enumerate(refs):
        report(progress, "checkpoints", number, len(refs))
        model = {**ref.spec, "dtype": concrete}
        if holds_hidden_states(model, corpus, sampling, cache) and holds_readout(model, cache):
            continue
        loaded = load(ref, device=device, dtype=concrete)
        try:
            hidden_states(loaded, corpus, sampling, Compute(device, concrete).batch_size, progress, cache)
            model_readout(loaded, cache)
        finally:
            del loaded
            free_memory()
    report(progress, "checkpoints", len(refs), len(refs))


def measure_runs(ref: ModelRef, device: str, dtype: str, corpus: Corpus, runs: list[tuple[Sampling, PGASettings]],
                 cache: ResultCache, progress: Progress | None = None) -> Iterator[dict]:
    """Load ``ref`` once and yield the record of each ``(sampling, settings)`` run (``measure_checkpoint``),
    with the load time in its ``seconds``; the model's memory is freed once the runs are done."""
    start = time.perf_counter()
    loaded = load(ref, device=device, dtype=dtype)
    load_seconds = round(time.perf_counter() - start, 3)
    try:
        for sampling, settings in runs:
            record = measure_checkpoint(loaded, corpus, sampling, settings, cache, progress)
            yield {**record, "seconds": {"load": load_seconds, **record["seconds"]}}
    finally:
        del loaded
        free_memory()


def free_memory() -> None:
    """Collect released models and return the GPU's cached blocks."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def training_sweep(name: str, revisions: list[str], corpus: Corpus, sampling: Sampling,
                   settings: PGASettings, device: str = "auto",
                   progress: Progress | None = None, cache: ResultCache | None = None,
                   store: ResultStore | None = None, dtype: str = "auto",
                   stored_only: bool = False) -> CheckpointSeries | None:
    """Per-layer PGA (every k and CCR depth in ``settings``) and held-out loss for each checkpoint.

    Each checkpoint's record is kept in ``store`` (default: ``cache``), intermediates in ``cache``; a
    checkpoint whose hidden states, readout and loss are cached is not loaded. ``stored_only``: None
    unless every record is in the store. Preview settings (``settings.preview``): every record from the cache
    alone, none stored; None when a checkpoint has not been measured yet."""
    cache = cache or default_cache()
    store = store or cache
    refs = check_series(name, revisions)
    concrete = dtype_name(pick_dtype(dtype, pick_device(device)))
    preview = settings.preview

    def from_cache(ref: ModelRef) -> dict | None:
        return record_from_cache(ref, concrete, device, corpus, sampling, settings, cache, progress)

    def measure(ref: ModelRef) -> dict:
        """From the cache where it holds the states, else by loading the checkpoint."""
        record = from_cache(ref)
        if record is None:
            (record,) = measure_runs(ref, device, concrete, corpus, [(sampling, settings)], cache, progress)
        return record

    results = []
    for number, ref in enumerate(refs):
        report(progress, "checkpoints", number, len(refs))
        spec = checkpoint_spec(ref, concrete, corpus, sampling, settings)
        if preview:
            record = from_cache(ref)
        elif stored_only:
            hit = store.get(SERIES_NAMESPACE, SERIES_VERSION, spec, CHECKPOINT_RECORD)
            record = None if hit is None else hit.value
        else:
            record = store.get_or_compute(SERIES_NAMESPACE, SERIES_VERSION, spec, functools.partial(measure, ref),
                                          CHECKPOINT_RECORD).value
        if record is None:
            return None
        results.append(CheckpointResult.from_record(record, step=number))
    report(progress, "checkpoints", len(refs), len(refs))
    common = {key: value for key, value in checkpoint_spec(refs[-1], concrete, corpus, sampling, settings).items()
              if key not in CHECKPOINT_KEYS}
    return CheckpointSeries(name, common, flag_duplicates(results), preview)


def stored_series(store: ResultStore) -> list[CheckpointSeries]:
    """Every model x settings group of checkpoint records in ``store`` (a sweep's output), no model loaded."""
    groups: dict[tuple, list[dict]] = {}
    for record in store.records(SERIES_NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD):
        common = {key: value for key, value in record["spec"].items() if key not in CHECKPOINT_KEYS}
        groups.setdefault((record["value"]["name"], canonical_json(common)), []).append(record["value"])
    found = []
    for (name, common), values in sorted(groups.items()):
        values.sort(key=lambda v: (v["step"] is None, v["step"] or 0, v["revision"] or ""))
        results = flag_duplicates([CheckpointResult.from_record(v, step=i) for i, v in enumerate(values)])
        found.append(CheckpointSeries(name, json.loads(common), results))
    return found
