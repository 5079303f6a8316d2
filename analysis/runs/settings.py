"""Every choice an analysis takes, with its default, in one place.

The CLI's flags, the dashboard's controls and the sweep plans read their defaults from here, and
every caption or export states the settings a result was computed with (carried on the result).

| setting | default | where it matters |
|---|---|---|
| model | ``smollm2-135m`` (built in, offline) | every analysis of a model |
| N token positions | 512 (``Sampling``) | PGA, token map, checkpoint series |
| k | ``default_k(d) = min(100, d // 4)``; the slider's grid ``k_grid(d)`` | PGA, convergence, token map, series |
| CCR depth | 1 (``DEFAULT_CCR``), slider 0-10 (``DEEPEST_CCR``) | PGA, token map, series |
| R null subspaces | 100 (PGA), 20 (convergence) | z and its band |
| triage's deeper CCR | 5 | the triage verdict |
| the report's CCR depths | 1, 5, 10 | the triage report |
| histogram bins | 300 | the cosine histogram |
| sensitivity delta | 0.005 | capacity at eps +- delta |
| preview | ``preview_settings``: 30 nulls (20-29 above d x k = 2^18), 128-token blocks above k = 16 | not stored |
| token map preview | the top two principal components after CCR | the plane drawn while UMAP runs |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from analysis.errors import require
from analysis.geometry.pga import PAPER_K as PAPER_K  # re-exported: the pages ask settings for it
from analysis.geometry.pga import PGASettings, default_k
from analysis.geometry.pga import capped_k as capped_k  # re-exported: one k asked of several models
from analysis.models.builtin import BUILTIN_NAME
from analysis.models.devices import pick_device

_PGA_DEFAULTS = {f.name: f.default for f in fields(PGASettings)}
DEFAULT_CCR = _PGA_DEFAULTS["ccrs"][0]
DEEPEST_CCR = 10  # the CCR slider's end
DEFAULT_N_NULL = _PGA_DEFAULTS["n_null"]
CONVERGENCE_N_NULL = 20
CONVERGENCE_UNITS = 200
TRIAGE_DEEPER_CCR = 5
REPORT_CCRS = (1, 5, 10)
OVERLAY_CCRS = (0, *REPORT_CCRS)  # the depths the readout page offers to overlay
HISTOGRAM_BINS = 300
SENSITIVITY_DELTA = 0.005
BATCH_SIZE = 8
SEED = 0


@dataclass(frozen=True)
class ModelChoice:
    """A model as the user names it: a reference (Hub id, folder, checkpoint folder, .gguf or the
    built-in name) and a revision (Hub branch / tag / SHA, or a checkpoint)."""

    name: str = BUILTIN_NAME
    revision: str | None = None
    allow_pickle: bool = False
    trust_remote_code: bool = False
    tokenizer: str | None = None

    @classmethod
    def parse(cls, text: str, **options) -> ModelChoice:
        """``"name@revision"`` (or just ``"name"``) -> ModelChoice."""
        name, _, revision = text.strip().partition("@")
        require(bool(name.strip()), f"A model reference is empty: {text!r}; write NAME or NAME@REVISION.")
        return cls(name.strip(), revision.strip() or None, **options)

    @property
    def label(self) -> str:
        return self.name + (f"@{self.revision}" if self.revision else "")


@dataclass(frozen=True)
class Compute:
    """Where and how a model runs; none of it changes a number beyond float rounding except dtype,
    which is part of every cache key. ``previews``: the caller draws quick previews of the same states (the
    dashboard's sliders), so an exact sweep leaves in memory the projections a preview starts from."""

    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = BATCH_SIZE
    previews: bool = False

    def __post_init__(self) -> None:
        require(isinstance(self.batch_size, int) and self.batch_size >= 1,
                f"The batch size must be a whole number of at least 1; got {self.batch_size!r}.")


def pga_settings(d: int, ks: tuple[int, ...] | None = None, ccrs: tuple[int, ...] = (DEFAULT_CCR,),
                 n_null: int = DEFAULT_N_NULL, seed: int = SEED, **options) -> PGASettings:
    """The PGA settings for a model of width ``d``: k defaults to ``default_k(d)`` and must stay below d
    (at k >= d every subspace keeps every distance: the null has no spread and z is rounding noise)."""
    for k in ks or ():
        require(1 <= k < d, f"k = {k} is out of range: k must be at least 1 and below d = {d} (at k >= d every "
                            f"subspace keeps every distance, so z is rounding noise); the default is {default_k(d)}.")
    return PGASettings(ks=tuple(ks) if ks else (default_k(d),), ccrs=tuple(ccrs), n_null=n_null, seed=seed,
                       **options)


PREVIEW_BLOCK = 128
PREVIEW_N_NULL = 30
PREVIEW_MIN_N_NULL = 20  # a preview z from fewer draws was often far off (its null sd from too few)
PREVIEW_WIDTH = 2**18  # d x k up to which a preview takes PREVIEW_N_NULL draws: the built-in model's every k
EVERY_PAIR_PREVIEW_TO_K = 16  # up to this k the ranking is most of an exact sweep: previews score every pair


def preview_n_null(settings: PGASettings, d: int) -> int:
    """How many of the R null draws a preview scores: ``PREVIEW_N_NULL`` up to d x k = ``PREVIEW_WIDTH`` (k the
    largest of ``settings.ks``), fewer in proportion above it and ``PREVIEW_MIN_N_NULL`` at least. A draw's bases
    (``[d, k]``, orthonormalised in float64) and projections cost d x k: a jump to k = 1024 at d = 2048 took 4.8-5.2 s
    on 2 AVX2 cores to draw 30 bases and project onto them at five layers, 3.3-3.6 s with 20. Not fewer than 20: z
    divides by the null's sd, and the chance that a layer's sd from R' draws is under 0.6 of the true one (its z 1.7x
    too far from 0) is 0.06 % at R' = 30, 0.5 % at 20, 4.6 % at 10; with 10, a Pythia-1B-shaped model's preview drew
    z = -4.6 where the exact z was -1.65 (BENCHMARKS.md)."""
    scaled = PREVIEW_N_NULL * PREVIEW_WIDTH // (d * max(settings.ks))
    return min(settings.n_null, max(PREVIEW_MIN_N_NULL, min(PREVIEW_N_NULL, scaled)))


def preview_settings(settings: PGASettings, d: int) -> PGASettings:
    """The same statistic on less work, for a curve drawn at once: :func:`block_preview`, or up to
    ``EVERY_PAIR_PREVIEW_TO_K`` :func:`first_draws_preview`. At k <= 16 ranking the pairs is most of an exact sweep
    (its projections little), so a preview on sampled pairs is work that serves no one: it delayed the exact curve after
    it by 11-20 % on 2 AVX2 cores. The exact sweep's first subspaces on every pair are not done again after it: the
    preview comes later (0.46-0.60 s against 0.20-0.30 s for 31 layers), the exact curve sooner (the preview now
    delays it by 5-10 %), and the preview is nearer it (BENCHMARKS.md). The previews made ahead of a move and the
    series' use it; a preview the page makes while the visitor waits is the exact run at a few layers
    (:func:`preview_layers`) or :func:`block_preview`."""
    small = max(settings.ks) <= EVERY_PAIR_PREVIEW_TO_K
    return first_draws_preview(settings, d) if small else block_preview(settings, d)


def block_preview(settings: PGASettings, d: int) -> PGASettings:
    """A preview on every pair inside seeded random blocks of 128 tokens (each token in 127 pairs; 32,512 of the
    130,816 pairs at N = 512, the same for the readout and every null draw), with the first R' of the R null draws
    (:func:`preview_n_null`: 30 up to d x k = 2^18).
    Projected in float32 on every CPU, as the exact run is: what a preview projects afresh serves the exact run after
    it (:func:`preview_subspaces`), where a bfloat16 projection, twice as fast on a CPU with bfloat16 arithmetic,
    served no one (a jump to k = 288 drew its exact curve 0.4-0.7 s later, BENCHMARKS.md).
    Measured against the exact curve in BENCHMARKS.md; rejected there: fewer tokens (z depends on them),
    the pairs inside blocks of 64 tokens with all 100 draws (three times the work for the same agreement)."""
    return replace(first_draws_preview(settings, d), pair_blocks=PREVIEW_BLOCK)


EXACT_LAYERS_PREVIEW_TO_N = 4 * PREVIEW_BLOCK  # up to here the pairs inside blocks are a quarter of all pairs or more
PREVIEW_LAYER_STEPS = 6  # the exact run as a preview: at the first, the last and every sixth of the way between
PREVIEW_FIRST_LAYERS = 5  # a preview on blocks: at this many layers first (:func:`preview_order`), then at more
PREVIEW_SECONDS = 0.75  # while it has taken less than this
PREVIEW_FIRST_WORK = 2**36  # multiply-adds of the first layers' projections, above which fewer layers come first


def spread_layers(n_entries: int, shown: int) -> list[int]:
    """The layers where the exact run is a page's own preview: every ``(n_entries - 1) / 6``-th from the embeddings,
    the last, and ``shown`` (the one the page shows beside the curve); seven or eight, or all of a model of few."""
    step = max(1, -(-(n_entries - 1) // PREVIEW_LAYER_STEPS))
    return sorted({*range(0, n_entries, step), n_entries - 1, shown % n_entries})


def preview_order(n_entries: int, shown: int) -> list[int]:
    """Every layer, in the order a page's own preview on blocks computes them: the first, the last, ``shown``, then
    each time the layer farthest from those before it (the lowest of equals), so that the layers done by any time
    are spread out."""
    order = list(dict.fromkeys([0, n_entries - 1, shown % n_entries]))
    gap = {layer: min(abs(layer - done) for done in order) for layer in range(n_entries) if layer not in order}
    while gap:  # each layer's distance to the nearest one in the order, kept as the order grows
        farthest = max(gap, key=lambda layer: (gap[layer], -layer))
        order.append(farthest)
        del gap[farthest]
        for layer in gap:
            gap[layer] = min(gap[layer], abs(layer - farthest))
    return order


def preview_first_layers(preview: PGASettings, n_tokens: int, d: int) -> int:
    """How many layers of :func:`preview_order` a page's own ``preview`` on blocks computes before the curve is drawn:
    ``PREVIEW_FIRST_LAYERS``, fewer where their projections, (R' + 1) N d k multiply-adds a layer, would pass
    ``PREVIEW_FIRST_WORK``, and 3 at least (the first layer, the last and the one shown). A jump to k = 1024 at
    d = 2048 took 1.7-1.9 s to project its five layers on 2 AVX2 cores, 0.34 s a layer; the papers' other sizes keep
    five (d = 1024, k = 512: 0.9 s)."""
    per_layer = (preview.n_null + 1) * n_tokens * d * max(preview.ks)
    return max(3, min(PREVIEW_FIRST_LAYERS, PREVIEW_FIRST_WORK // per_layer))


def preview_layers(settings: PGASettings, n_tokens: int, n_entries: int, shown: int) -> list[int] | None:
    """The layers at which a page's own preview is the exact run itself, which then computes only the others; None
    where :func:`block_preview` serves better. Up to k = 16 and N = 512 the pairs inside blocks are a quarter of all
    pairs or more and ranking them is most of the work: a preview on them, which the exact run cannot use, delayed it
    by 14-32 % on 2 AVX2 cores (7-8 % at N = 1024), where the exact run at seven layers takes about as long (0.1-0.3 s
    at N = 256-512) and is not done again (BENCHMARKS.md). The layers: :func:`spread_layers`; None where they would be
    more than half of the ``n_entries`` (a model of few layers: its exact run would keep the first chart waiting)."""
    if max(settings.ks) > EVERY_PAIR_PREVIEW_TO_K or n_tokens > EXACT_LAYERS_PREVIEW_TO_N:
        return None
    layers = spread_layers(n_entries, shown)
    return layers if 2 * len(layers) <= n_entries else None


def first_draws_preview(settings: PGASettings, d: int) -> PGASettings:
    """A preview on the exact sweep's own pairs with the first R' of the R null draws (:func:`preview_n_null`): its
    rho is the exact one, its null a subset of the exact null, and the exact sweep after it scores only the other
    draws (``pga_sweep``)."""
    return replace(settings, n_null=preview_n_null(settings, d), projection="float32", preview=True)


def preview_subspaces(settings: PGASettings, d: int, device: str = "auto") -> int:
    """How many leading subspaces of an exact sweep of ``settings`` (the readout, then null draws) a preview of the
    same settings scores, where it can start from the exact sweep's projections (``pga_sweep``'s ``for_previews``);
    0 where it cannot: on a GPU (no preview) or when the exact sweep projects in bfloat16."""
    preview = preview_settings(settings, d)
    return preview.n_null + 1 if needs_preview(device) and preview.projection == settings.projection else 0


def needs_preview(device: str = "auto", k: int | None = None) -> bool:
    """A preview pays on the CPU; on a GPU the exact curve is as quick to come, and at k = 1 too, where the exact sweep
    counts three tie runs instead of sorting (0.4-0.5 s for 31 layers on 2 AVX2 cores: drawing a preview first made
    the exact curve come a second later, BENCHMARKS.md)."""
    return pick_device(device).type == "cpu" and k != 1


def k_grid(d: int) -> tuple[int, ...]:
    """The k values worth comparing on a slider: powers of two up to d / 2, d / 2 itself and the
    default ``min(100, d // 4)``; never d (at k = d, z is rounding noise)."""
    top = max(1, d // 2)
    powers = [2**i for i in range(top.bit_length()) if 2**i <= top]
    return tuple(sorted({*powers, top, default_k(d)}))


def ccr_depths() -> list[int]:
    """The CCR slider's values: 0 (nothing removed) to ``DEEPEST_CCR``."""
    return list(range(DEEPEST_CCR + 1))


def clamp_ccr(ccr: int) -> int:
    return min(max(ccr, 0), DEEPEST_CCR)


def clamp_layer(layer: int, n_entries: int) -> int:
    """A layer asked for (a link, a default) within 0 .. n_entries - 1 (0: embeddings, last: after the final norm)."""
    return min(max(layer, 0), n_entries - 1)


def snap_k(k: int, grid: tuple[int, ...]) -> int:
    """The grid value nearest to ``k`` on a log scale (a k typed in a link)."""
    return min(grid, key=lambda value: (abs(math.log(value) - math.log(max(k, 1))), value))


def clip_epsilon(eps: float) -> float:
    """epsilon as the capacity formulas take it: clipped into (0, 1] (a model whose mu + 2 sigma is
    at or below 0 is treated as 1e-6, the formulas' lower edge)."""
    return min(max(float(eps), 1e-6), 1.0)


def _adjacent_k(grid: tuple[int, ...], k: int, ccr: int, steps: int) -> list[tuple[int, int]]:
    index = grid.index(k) if k in grid else 0
    return [(grid[i], ccr) for i in (index - steps, index + steps) if 0 <= i < len(grid)]


def along_sliders(grid: tuple[int, ...], k: int, ccr: int, reach: int | None = None) -> list[tuple[int, int]]:
    """Every (k, CCR) setting one slider move from (k, CCR), nearest first: at each number of steps the k on
    either side on the grid, then CCR depth - steps and + steps; ``reach``: that many steps at most."""
    reach = max(len(grid), DEEPEST_CCR + 1) if reach is None else reach
    return [setting for steps in range(1, reach + 1) for setting in
            _adjacent_k(grid, k, ccr, steps) + [(k, c) for c in (ccr - steps, ccr + steps) if 0 <= c <= DEEPEST_CCR]]


def nearby(grid: tuple[int, ...], k: int, ccr: int) -> list[tuple[int, int]]:
    """The settings a visitor most likely asks for next, in order: every setting one slider step away, then
    the ends of both sliders (where a jump lands: End, Home, a drag to the edge). Previewed before the exact
    run and filled in exactly after it; :func:`along_sliders` extends it for the previews."""
    ends = [(grid[0], ccr), (grid[-1], ccr), (k, 0), (k, DEEPEST_CCR)]
    return list(dict.fromkeys(along_sliders(grid, k, ccr, 1) + [end for end in ends if end != (k, ccr)]))
