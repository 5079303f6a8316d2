"""The cached chain a user's choice runs through: model -> hidden states -> readout -> PGA results.

Each step is stored in the disk cache under a spec that holds the step's own settings and the spec
of what it was computed from, so a result is never confused with one from other weights, text or
settings. PGA results are cached per (layer, k, CCR depth): moving a slider computes one new entry.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis import arch
from analysis.cache import ResultCache, default_cache
from analysis.corpus import Corpus, Sampling
from analysis.errors import require
from analysis.hidden import HiddenStates, hidden_states
from analysis.loading import LoadedModel
from analysis.pga import LayerPGA, PGASettings, pga_sweep
from analysis.progress import Progress
from analysis.readout import ReadoutBasis, readout_basis

READOUT_VERSION = 1
PGA_VERSION = 1


def model_readout(loaded: LoadedModel, cache: ResultCache | None = None) -> ReadoutBasis:
    """The readout basis of the loaded model's W_U, cached by model identity."""
    cache = cache or default_cache()
    return cache.get_or_compute(
        "readout", READOUT_VERSION, {"model": loaded.ref.spec},
        lambda: readout_basis(arch.unembedding(loaded.model).detach(), device=loaded.device),
    ).value


def model_states(loaded: LoadedModel, corpus: Corpus, sampling: Sampling,
                 progress: Progress | None = None, cache: ResultCache | None = None):
    """(HiddenStates, spec) for the model, text and sampling; the spec keys everything downstream."""
    entry = hidden_states(loaded, corpus, sampling, progress=progress, cache=cache)
    return entry.value, entry.provenance["spec"]


def cached_pga(states: HiddenStates | np.ndarray, states_spec: dict, basis: ReadoutBasis, basis_spec: dict,
               settings: PGASettings, layers: list[int], device: str = "auto",
               progress: Progress | None = None, cache: ResultCache | None = None) -> list[LayerPGA]:
    """PGA for ``layers`` x ``settings.ks`` x ``settings.ccrs``, each (layer, k, ccr) cached on its own."""
    cache = cache or default_cache()
    array = states.states if isinstance(states, HiddenStates) else states
    for layer in layers:
        require(-len(array) <= layer < len(array),
                f"Layer {layer} is out of range: the states have layers 0..{len(array) - 1}.")
    layers = [layer % len(array) for layer in layers]
    common = {k: v for k, v in settings.spec.items() if k not in ("ks", "ccrs")}

    def spec(layer: int, k: int, ccr: int) -> dict:
        return {"states": states_spec, "readout": basis_spec, "layer": layer, "k": k, "ccr": ccr, **common}

    found: dict[tuple, LayerPGA] = {}
    for layer in layers:
        missing_k, missing_c = set(), set()
        for k in settings.ks:
            for c in settings.ccrs:
                hit = cache.get("pga", PGA_VERSION, spec(layer, k, c))
                if hit is None:
                    missing_k.add(k)
                    missing_c.add(c)
                else:
                    found[layer, k, c] = hit.value
        if missing_k:
            fresh = replace(settings, ks=tuple(sorted(missing_k)), ccrs=tuple(sorted(missing_c)))
            for result in pga_sweep(array, basis, fresh, [layer], device, progress):
                cache.put("pga", PGA_VERSION, spec(result.layer, result.k, result.ccr), result)
                found[result.layer, result.k, result.ccr] = result
    return [found[layer, k, c] for layer in layers for k in settings.ks for c in settings.ccrs]
