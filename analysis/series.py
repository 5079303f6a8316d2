"""A model across its training checkpoints: per-layer metrics and loss per checkpoint, each cached on
its own (an interrupted sweep resumes where it stopped), and checkpoints whose weights are
identical to another's flagged, so a flat curve is never mistaken for a finding.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, replace

import torch

from analysis.cache import ResultCache, default_cache
from analysis.corpus import Corpus, Sampling, bos_token
from analysis.errors import InputError, require
from analysis.hidden import token_sample, tokenised_corpus
from analysis.loading import load
from analysis.loss import heldout_windows, mean_loss
from analysis.model_info import describe
from analysis.pga import LayerPGA, PGASettings
from analysis.pipeline import cached_pga, model_readout, model_states
from analysis.progress import Progress, report
from analysis.refs import ModelRef, hash_files, list_checkpoints, resolve, weight_files

SERIES_VERSION = 1
LOSS_WINDOWS = 16


@dataclass(frozen=True)
class CheckpointResult:
    """One checkpoint's metrics. ``duplicate_of`` names an earlier checkpoint with identical weights."""

    step: int
    revision: str
    identity: str
    fingerprint: str | None
    layers: list[LayerPGA]
    loss: float
    seconds: dict
    duplicate_of: str | None = None


def weights_fingerprint(ref: ModelRef) -> str | None:
    """A hash of the weights alone: the Hub's published file hashes, else the files' contents."""
    if ref.kind == "hub":
        from analysis.hub import published_weight_hashes

        published = published_weight_hashes(ref.name, ref.identity)
        if published:
            return "hub:" + published
    if ref.gguf_file:
        return ref.identity
    return "sha256:" + hash_files(weight_files(ref.path, allow_pickle=True, name=ref.name))


def check_series(name: str, revisions: list[str]) -> list[ModelRef]:
    """Resolve every revision, listing all problems at once: missing revisions and mixed architectures."""
    require(len(revisions) >= 1, f"No checkpoints chosen for {name!r}; pick at least one.")
    available = {c.revision for c in list_checkpoints(name)}
    refs, problems = [], []
    for revision in revisions:
        try:
            refs.append(resolve(name, revision or None))
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


def flag_duplicates(results: list[CheckpointResult]) -> list[CheckpointResult]:
    """Mark each checkpoint whose fingerprint equals an earlier one's."""
    first: dict[str, str] = {}
    flagged = []
    for result in results:
        original = first.get(result.fingerprint) if result.fingerprint else None
        if result.fingerprint and original is None:
            first[result.fingerprint] = result.revision
        flagged.append(replace(result, duplicate_of=original))
    return flagged


def _measure(ref: ModelRef, corpus: Corpus, sampling: Sampling, settings: PGASettings, device: str,
             cache: ResultCache, progress: Progress | None) -> dict:
    timings = {}
    start = time.perf_counter()
    loaded = load(ref, device=device)
    timings["load"] = time.perf_counter() - start
    try:
        start = time.perf_counter()
        hidden, provenance = model_states(loaded, corpus, sampling, progress, cache)
        sample = token_sample(loaded, corpus, sampling, cache)
        timings["forward"] = time.perf_counter() - start
        start = time.perf_counter()
        layers = cached_pga(hidden, provenance["spec"], model_readout(loaded, cache), loaded.spec, settings,
                            list(range(hidden.n_layers)), device, progress, cache)
        timings["metrics"] = time.perf_counter() - start
        start = time.perf_counter()
        windows = heldout_windows(tokenised_corpus(loaded, corpus, cache), sample, sampling, LOSS_WINDOWS,
                                  bos_token(loaded.tokenizer))
        loss = mean_loss(loaded, windows)
        timings["loss"] = time.perf_counter() - start
    finally:
        del loaded
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {"layers": layers, "loss": loss, "seconds": timings}


def training_sweep(name: str, revisions: list[str], corpus: Corpus, sampling: Sampling,
                   settings: PGASettings | None = None, device: str = "auto",
                   progress: Progress | None = None, cache: ResultCache | None = None) -> list[CheckpointResult]:
    """Per-layer PGA (every k and CCR depth in ``settings``) and held-out loss for each checkpoint."""
    cache, settings = cache or default_cache(), settings or PGASettings()
    refs = check_series(name, revisions)
    results = []
    for number, ref in enumerate(refs):
        report(progress, "checkpoints", number, len(refs))
        spec = {"model": ref.spec, "corpus": corpus.spec, "sampling": sampling.spec, "settings": settings.spec,
                "loss_windows": LOSS_WINDOWS}
        entry = cache.get_or_compute("checkpoint", SERIES_VERSION, spec,
                                     lambda ref=ref: _measure(ref, corpus, sampling, settings, device, cache,
                                                              progress))
        value = entry.value
        results.append(CheckpointResult(ref.step if ref.step is not None else number, ref.revision or "",
                                        ref.identity, weights_fingerprint(ref), value["layers"], value["loss"],
                                        value["seconds"]))
    report(progress, "checkpoints", len(refs), len(refs))
    return flag_duplicates(results)
