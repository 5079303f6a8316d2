"""A 2-D map (UMAP, seeded) of one layer's hidden states after CCR, with colourings per token:
the projection on PC1, the share of the state inside V_k, and a coarse token class. Its preview,
drawn while UMAP runs, is the corrected states' top two principal components (milliseconds)."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
import threading
import time

import numpy as np
import torch

from analysis.compiled import cached, make_room
from analysis.errors import require
from analysis.geometry.ccr import fit_pca, remove_components
from analysis.progress import Progress

MAP_METHODS = ("umap", "pca")


def token_map(states: np.ndarray, readout_k: np.ndarray, ccr: int = 1, seed: int = 0,
              n_neighbors: int = 15, method: str = "umap", progress: Progress | None = None) -> dict[str, np.ndarray]:
    """``coords`` ``[N, 2]``, ``pc1`` ``[N]`` (projection of the centred state on PC1) and
    ``share_in_readout`` ``[N]`` (``||V_k^T h||^2 / ||h||^2`` of the corrected state h). ``method``
    "pca": ``coords`` are h's coordinates on the corrected states' top two components (the original
    PCA's components ccr + 1 and ccr + 2), the preview of the UMAP. ``progress``: told of UMAP's epochs
    (:func:`_epochs`)."""
    require(method in MAP_METHODS, f"Unknown map method {method!r}; choose one of {MAP_METHODS}.")
    require(len(states) > n_neighbors + 1, f"The token map needs more points than neighbours: N = {len(states)}, "
                                           f"n_neighbors = {n_neighbors}; raise N or lower n_neighbors.")
    x = torch.as_tensor(states, dtype=torch.float64)
    pca = fit_pca(x)
    corrected = remove_components(x, pca, ccr)
    inside = (corrected @ torch.as_tensor(readout_k, dtype=torch.float64)).square().sum(1)
    share = (inside / corrected.square().sum(1).clamp(min=1e-30)).numpy()
    pc1 = ((x - pca.mean) @ pca.components[:, 0]).numpy()
    if method == "pca":
        plane = torch.zeros(x.shape[1], 2, dtype=torch.float64)
        next_two = pca.components[:, ccr:ccr + 2]  # fewer when the states have rank <= ccr + 1
        plane[:, :next_two.shape[1]] = next_two
        return {"coords": (corrected @ plane).numpy(), "pc1": pc1, "share_in_readout": share}
    reducer = umap_module().UMAP(n_neighbors=n_neighbors, n_components=2, random_state=seed, n_jobs=1)
    _mapping.progress = progress
    try:
        coords = reducer.fit_transform(corrected.numpy().astype(np.float32))
    finally:
        _mapping.progress = None
    return {"coords": coords, "pc1": pc1, "share_in_readout": share}


EPOCH_REPORTS_EVERY = 0.1  # seconds between two reports of UMAP's epochs
_mapping = threading.local()  # ``progress``: told of the epochs of the map this thread draws


def _epochs(epochs: range, **_tqdm_kwds):
    """umap-learn's epoch loops (``for n in tqdm(range(n_epochs), **tqdm_kwds)`` in ``umap.layouts``, most of a map's
    time: 0.6-2 s at N = 512 on 2 cores) in place of its tqdm bar: each epoch reported to this thread's ``progress``
    as ("epochs", n, total) at most every ``EPOCH_REPORTS_EVERY`` seconds: the dashboard's pause points in a map.
    umap-learn has no callback, and a tqdm bar's file cannot pause: tqdm writes it holding the lock every bar of the
    process takes (a write that waited or raised held every other bar, a model load's, off)."""
    progress, last = getattr(_mapping, "progress", None), 0.0
    for n in epochs:
        if progress is not None and time.monotonic() - last >= EPOCH_REPORTS_EVERY:
            progress("epochs", n, len(epochs))
            last = time.monotonic()
        yield n
    if progress is not None:
        progress("epochs", len(epochs), len(epochs))


@functools.cache
def umap_module():
    """umap-learn, its compiled functions cached on disk as the project's own are (``analysis.compiled``: numba's
    cache, keyed on each function's source file and the CPU compiled for). umap-learn caches one of its ~110 numba
    functions, so every process compiled the rest again on its first map: 8.2-9.3 s at N = 512 on 2 cores, against
    1.6-2.0 s from the disk cache and 0.6 s for a process's later maps (BENCHMARKS.md). A function numba cannot place
    a cache for stays compiled per process. Its epoch loops report to the mapping thread's progress
    (:func:`_epochs`)."""
    import numba

    make_room(importlib.util.find_spec("umap").origin)  # and pynndescent's, beside it: both cache some at import
    import umap

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("umap", "pynndescent"):
            for value in list(vars(module).values()):
                if isinstance(value, numba.core.dispatcher.Dispatcher):
                    cached(value)
    umap.layouts.tqdm = _epochs  # its epochs reported (tested against the pinned umap-learn)
    return umap


def token_class(text: str) -> str:
    """word, number, punctuation, whitespace or other, from the decoded token."""
    stripped = text.strip()
    if not stripped:
        return "whitespace"
    if re.fullmatch(r"[^\W\d_]+", stripped):
        return "word"
    if re.fullmatch(r"\d+", stripped):
        return "number"
    if re.fullmatch(r"[^\w\s]+", stripped):
        return "punctuation"
    return "other"
