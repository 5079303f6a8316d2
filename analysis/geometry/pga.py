"""Subspace PGA (predictive-geometric alignment), per layer, against random subspaces.

For one layer's hidden states ``H`` ``[N, d]`` and the readout basis ``V_k`` ``[d, k]``:
  1. CCR-c: centre H, remove its top c principal components (``analysis.geometry.ccr``).
  2. Cosine similarity of every pair i < j, on the corrected H and on ``H V_k``. Spearman's rho of
     the two is ``rho_readout``; cosine distance = 1 - similarity, so the ranks correlate the same.
     Less work, the same pairs for the readout and every null draw: a seeded uniform sample of
     ``max_pairs`` pairs, or (``pair_blocks = b``) every pair inside seeded random blocks of b tokens,
     so each token still takes part and the Gram matrices shrink from N x N to (N / b) x b x b.
  3. Null: R subspaces uniform on the Grassmannian (QR of ``[d, k]`` standard Gaussians, draw j seeded by
     (seed, j); the same draws serve every layer and CCR depth, and are nested in k: a draw's basis at k'
     < k is the first k' columns of its basis at k).
  4. ``z = (rho_readout - mean(null)) / std(null, ddof=1)``,
     ``p = (1 + #{null >= rho_readout}) / (1 + R)``. z grows roughly like sqrt(N): show it with N.
  5. ``z_interval``: 2.5 and 97.5 percentiles of z over bootstrap resamples of the R null draws,
     the spread of z that comes from the null being random.
Also per layer: the angle between each of the top principal directions of the centred states and
V_k, ``theta_i = arccos ||V_k^T u_i||`` in degrees, the share ``||V_k^T u_i||^2`` of each direction
inside V_k, the share of the total variance inside V_k, and the spectral metrics of the corrected
states (``analysis.geometry.spectral``).

Option ``ccr_fit="half"``: the mean and components are fitted on a seeded random half of the
tokens, and everything is scored on the other half (N halves). Option ``projection="bfloat16"``: ``H V`` is
multiplied for every subspace in bfloat16 (2-4x faster where the CPU has bfloat16 arithmetic, rho within ~1e-3).

Each layer's principal components are kept in memory (a few MB, keyed by the states' bytes), so a
new k or CCR depth on states seen before skips the PCA.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from functools import cache, cached_property, partial

import numpy as np
import torch

from analysis.cores import WORKERS, on_every_core, one_blas_thread
from analysis.errors import InputError, require
from analysis.geometry.ccr import PCA, fit_pca, fit_pcas, project_out
from analysis.geometry.ranks import (
    PairRows,
    RankedReference,
    pair_rows,
    ranked_reference,
    spearman_cosines,
    spearman_ranked,
)
from analysis.geometry.readout import ReadoutBasis
from analysis.geometry.spectral import spectral_metrics
from analysis.models.devices import pick_device
from analysis.progress import Progress, report
from analysis.storage.codec import storable
from analysis.storage.memory import EngineMemory, default_memory

MEMORY_BUDGET_BYTES = 512 * 2**20
BATCHED_FROM_K = 64  # the projection's faster form on 2 AVX2 cores: one wide matmul below, a batched one from here
CHUNK_SUBSPACES = 16  # a pause point every 16 subspaces: every ~0.1 s of an exact layer on 2 cores
# and a projection's chunk at most this many n d k (~0.05 s on 2 AVX2 cores): 16 subspaces at N = 512, d = 2048,
# k = 1024 took 0.35 s, which a page's own work waited for behind a preview ahead
CHUNK_PROJECTED = 2**31
# The layers' CCR-0 projections are kept while they fit in this share of the engine's memory. At half, the background's
# preview ahead of k = 256 (504 MB at d = 576) pushed out the least recently used half of the memory: the previews of
# the nearby settings made before it, the layers' PCAs, the bases of the visitor's k (BENCHMARKS.md).
PROJECTIONS_SHARE = 0.25


@dataclass(frozen=True)
class PGASettings:
    """Every choice of the statistic; all part of the cache key. Defaults are the paper's; k has none
    here because it depends on the width (``analysis.runs.settings.pga_settings``)."""

    ks: tuple[int, ...]
    ccrs: tuple[int, ...] = (1,)
    n_null: int = 100
    seed: int = 0
    max_pairs: int | None = None
    pair_blocks: int | None = None
    projection: str = "float32"
    ccr_fit: str = "same"
    n_pcs: int = 10
    alpha_fit: tuple[int, int] = (1, 100)
    n_bootstrap: int = 1000
    preview: bool = False  # drawn first and replaced: remembered in memory, never stored

    def __post_init__(self) -> None:
        require(len(self.ks) >= 1 and len(self.ccrs) >= 1, "Give at least one k and one CCR depth.")
        require(self.n_null >= 2, f"The number of null subspaces R must be at least 2; got {self.n_null}.")
        require(self.ccr_fit in ("same", "half"), f"ccr_fit must be 'same' or 'half'; got {self.ccr_fit!r}.")
        require(all(c >= 0 for c in self.ccrs), f"CCR depths must be >= 0; got {list(self.ccrs)}.")
        require(self.max_pairs is None or self.max_pairs >= 3,
                f"max_pairs must be at least 3 (or None for all pairs); got {self.max_pairs}.")
        require(self.pair_blocks is None or self.pair_blocks >= 3,
                f"pair_blocks must be at least 3 tokens (or None for all pairs); got {self.pair_blocks}.")
        require(self.max_pairs is None or self.pair_blocks is None, "Give max_pairs or pair_blocks, not both.")
        require(self.projection in ("float32", "bfloat16"),
                f"projection must be 'float32' or 'bfloat16'; got {self.projection!r}.")

    @property
    def spec(self) -> dict:
        """The settings as plain JSON, for cache keys. ``preview`` appears only in a preview's, so the keys of exact
        results stay those they had before previews existed."""
        spec = {**asdict(self), "ks": list(self.ks), "ccrs": list(self.ccrs), "alpha_fit": list(self.alpha_fit)}
        if not self.preview:
            del spec["preview"]
        return spec


class NullMoments:
    """Mean and sample standard deviation (ddof = 1) of a result's ``null`` draws."""

    null: np.ndarray

    @property
    def null_mean(self) -> float:
        return float(self.null.mean())

    @property
    def null_std(self) -> float:
        return float(self.null.std(ddof=1))


class FirstAngle:
    """The angle of a result's first principal direction to V_k (the first of ``pc_angles_deg``)."""

    pc_angles_deg: np.ndarray

    @property
    def pc1_angle_deg(self) -> float:
        return float(self.pc_angles_deg[0])


@storable
@dataclass(frozen=True)
class LayerPGA(NullMoments, FirstAngle):
    """The PGA statistic and its companions for one (layer, k, CCR depth)."""

    layer: int
    k: int
    ccr: int
    n_tokens: int
    n_pairs: int
    rho_readout: float
    null: np.ndarray = field(repr=False)
    z: float
    z_interval: tuple[float, float]
    p_value: float
    pc_angles_deg: np.ndarray = field(repr=False)
    pc_share_in_readout: np.ndarray = field(repr=False)
    variance_in_readout: float
    rankme: float
    alpha_req: float
    isotropy: float
    condition_number: float

    def to_record(self) -> dict:
        """Every field as plain JSON (arrays as lists); ``from_record`` restores it exactly."""
        plain = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value.tolist() if isinstance(value, np.ndarray) else list(value) if isinstance(value, tuple)
                else value for name, value in plain.items()}

    @classmethod
    def from_record(cls, record: dict) -> LayerPGA:
        arrays = {name: np.asarray(record[name], dtype=float) for name in ("null", "pc_angles_deg",
                                                                          "pc_share_in_readout")}
        return cls(**{**record, **arrays, "z_interval": tuple(record["z_interval"])})

    def to_json(self) -> dict:
        """The CLI contract's per-layer object (plus intervals, PC angles and the null itself)."""
        return {
            "layer": self.layer, "z": self.z, "rho_readout": self.rho_readout,
            "null_mean": self.null_mean, "null_std": self.null_std, "p_value": self.p_value,
            "pc1_angle_deg": self.pc1_angle_deg, "rankme": self.rankme, "alpha_req": self.alpha_req,
            "isotropy": self.isotropy, "condition_number": self.condition_number,
            "z_interval": list(self.z_interval), "pc_angles_deg": self.pc_angles_deg.tolist(),
            "pc_share_in_readout": self.pc_share_in_readout.tolist(),
            "variance_in_readout": self.variance_in_readout, "null": self.null.tolist(),
        }


@dataclass(frozen=True)
class LayerShape(FirstAngle):
    """What a layer's lower charts draw at one (k, CCR depth), no null draw in it: its top principal directions'
    angles to V_k and shares inside it, and the spectral metrics of its CCR-corrected states. :class:`LayerPGA`'s
    fields of the same names, equal to them (:func:`remembered_shapes`)."""

    layer: int
    k: int
    ccr: int
    pc_angles_deg: np.ndarray = field(repr=False)
    pc_share_in_readout: np.ndarray = field(repr=False)
    rankme: float
    alpha_req: float
    isotropy: float
    condition_number: float


PAPER_K = 100  # the readout dimension the paper uses


def capped_k(k: int, d: int) -> int:
    """``k`` at most d / 4 (at least 1): at k = d every subspace keeps every distance (no z)."""
    return min(k, max(1, d // 4))


def default_k(d: int) -> int:
    """The paper's k = 100, capped for a width of ``d`` (:func:`capped_k`)."""
    return capped_k(PAPER_K, d)


def check_layers(layers, n_entries: int) -> None:
    """InputError unless every layer indexes ``n_entries`` hidden-state entries (negative: from the end)."""
    for layer in layers:
        require(-n_entries <= layer < n_entries, f"Layer {layer} is out of range: there are entries 0..{n_entries - 1} "
                                                 "(0 = embeddings, last = after the final norm).")


def validate_states(states: np.ndarray, d: int | None = None, layers: list[int] | None = None) -> np.ndarray:
    """``[L, N, d]`` view of ``states`` (``[N, d]`` is one layer); InputError naming what is wrong. ``layers``:
    only these are used (each must be in range; only their values are checked for NaN and Inf)."""
    states = np.asarray(states)
    require(states.ndim in (2, 3), f"Hidden states must be [N, d] (one layer) or [L, N, d]; got a "
                                   f"{states.ndim}-D array of shape {states.shape}.")
    states = states[None] if states.ndim == 2 else states
    require(states.shape[1] >= 3, f"N = {states.shape[1]} token positions; PGA needs N >= 3.")
    if d is not None:
        require(states.shape[2] == d, f"Hidden states have width {states.shape[2]} but W_U has d = {d}; "
                                      "they must come from the same model.")
    check_layers(layers or (), len(states))
    checked = range(len(states)) if layers is None else sorted({i % len(states) for i in layers})
    bad = [i for i in checked if not np.isfinite(states[i]).all()]
    require(not bad, f"Hidden states hold NaN or Inf at layer(s) {bad}.")
    return states


NULL_STREAM = 0x6E756C6C  # "null": the null draws' seeds, apart from the pair and bootstrap samplings'


NULL_CHUNK = 8  # draws orthonormalised at a time: float64 temporaries of ~4 x 8 d k values, not ~4 x R d k
# fewer where a draw is large, so that a chunk is at most ~0.15 s on 2 AVX2 cores (a draw at d = 2048, k = 1024 is
# 0.135 s; eight of them held a visitor's exact curve off for 0.9 s, thirty for 3.7 s, BENCHMARKS.md)
NULL_CHUNK_VALUES = 2**31  # d k^2 of a chunk


def null_bases(d: int, k: int, n_null: int, seed: int, first: int = 0, out: torch.Tensor | None = None,
               pause: Callable[[], None] | None = None, drawn: Callable[[int], None] | None = None):
    """``[R - first, d, k]`` orthonormal bases uniform on the Grassmannian: draws ``first`` .. R - 1, draw j the
    orthonormalised columns of a ``[d, k]`` standard Gaussian G from its own stream ``(seed, NULL_STREAM, j)``, whose
    first k x d values are its columns. So the first R of a larger R are the same draws, and the draws are nested in
    k: ``Q = G R^-1`` with R upper triangular, so a basis's first k' columns are the basis of the first k' Gaussian
    columns (equal up to rounding), and one projection onto the bases at k serves every smaller k.
    For k <= d / 2, Cholesky QR: ``R^T R = G^T G``, two BLAS-3 products (about 2x faster than Householder QR at
    d = 2048, k = 1024); G is well conditioned there (condition number below ~6), so Q is orthonormal to ~1e-14.
    Wider, LAPACK's Householder QR, its columns' signs set so that R's diagonal is positive, as Cholesky's is: the
    one QR factorisation both ways, so the bases at k and at k' are nested across the two.
    Float64 numpy; or written into ``out`` (a tensor of that shape, any float dtype and device), which is returned:
    ``NULL_CHUNK`` draws at a time, so no float64 copy of all of them is ever made (1.2 GB at d = 2048, k = 1024,
    70 draws). The Gaussians are drawn on the CPU and orthonormalised on ``out``'s device, on a GPU in float64 there
    too: 100 draws at d = 2048, k = 1024 in 1.0 s against 2.6 s on an H200 machine's 16 CPU cores, within 2e-9.
    ``pause`` is called between chunks (fewer than ``NULL_CHUNK`` draws where a draw is large), ``drawn(j)`` after
    each, draws ``first`` .. j - 1 being in."""
    filled = torch.empty((n_null - first, d, k), dtype=torch.float64) if out is None else out
    chunk = max(1, min(NULL_CHUNK, NULL_CHUNK_VALUES // (d * k * k)))
    for start in range(first, n_null, chunk):
        if start > first and pause is not None:
            pause()
        stop = min(n_null, start + chunk)
        filled[start - first:stop - first] = _orthonormal_draws(d, k, seed, range(start, stop), filled.device)
        if drawn is not None:
            drawn(stop)
    return filled.numpy() if out is None else out


GRAM_ROWS = 64  # the rows of a block of G^T G's lower triangle, at most 8 blocks (:func:`_lower_gram`)


def _lower_gram(rows: torch.Tensor) -> torch.Tensor:
    """``[m, k, k]``: ``rows rows^T`` (``rows`` ``[m, k, d]``) on and below its diagonal blocks, zeros above them (all
    that Cholesky reads), a block row at a time: 0.035 against 0.050-0.058 s for the whole product at d = 2048,
    k = 1024 on 2 AVX2 cores (36 of the 64 block products at 8 blocks)."""
    m, k, _ = rows.shape
    blocks = min(8, max(1, k // GRAM_ROWS))
    gram = rows.new_zeros((m, k, k))
    edges = [k * i // blocks for i in range(blocks + 1)]
    for low, high in itertools.pairwise(edges):
        gram[:, low:high, :high] = rows[:, low:high] @ rows[:, :high].mT
    return gram


def _orthonormal_draws(d: int, k: int, seed: int, draws: range, device: torch.device) -> torch.Tensor:
    """``[len(draws), d, k]`` float64 on ``device``: :func:`null_bases`'s draws ``draws``."""
    gaussian = np.empty((len(draws), k, d))  # G^T, each draw filled on a core of its own (numpy lets go of the GIL)
    on_every_core(lambda j: np.random.default_rng([seed, NULL_STREAM, j]).standard_normal(
        out=gaussian[j - draws.start]), draws)
    gaussian = torch.from_numpy(gaussian).to(device)
    if 2 * k <= d:
        lower = torch.linalg.cholesky(_lower_gram(gaussian))  # R^T (Cholesky reads the lower triangle only)
        return torch.linalg.solve_triangular(lower, gaussian, upper=False).mT  # (R^-T G^T)^T = G R^-1
    q, r = torch.linalg.qr(gaussian.mT)  # on every core
    return q * torch.diagonal(r, dim1=-2, dim2=-1).sign()[:, None, :]  # R's diagonal positive, as above


def _candidates(memory: EngineMemory, basis: ReadoutBasis, k: int, n_null: int, seed: int, dtype: torch.dtype,
                device: torch.device, pause: Callable[[], None] | None = None) -> tuple[tuple, torch.Tensor]:
    """(key, ``[1 + R, d, k]``): V_k (``basis.top(k)``) then the R null bases, as ``dtype`` on ``device``;
    remembered in ``memory`` under the key, since the dashboard asks for one layer at a time. The key names V_k
    (its first part: the basis's digest and k) and the draws but not R: the draws are nested in R, so the bases of a
    larger R serve a smaller one, and a larger R draws only the bases it adds (a preview's 30, then an exact run's
    100). Remembered as (bases, count): the first ``count`` are in, the rest still to draw, each chunk's draws
    remembered as soon as they are drawn, so that work stopped in the middle (the background's, for a visitor's
    jump to the k it was drawing for) loses none (the next call draws the rest into the same tensor where it is large
    enough). ``pause``: called while the bases are drawn (:func:`null_bases`)."""
    key = ((basis.digest, k), seed, str(dtype), str(device))
    bases, count = memory.get("candidate bases", key) or (None, 0)
    if count < 1 + n_null:
        if bases is None or len(bases) < 1 + n_null:
            grown = torch.empty((1 + n_null, basis.d, k), dtype=dtype, device=device)
            if count:
                grown[:count] = bases[:count]
            bases = grown
        if not count:
            bases[0], count = torch.as_tensor(basis.top(k)), 1

        def drawn(stop: int) -> None:  # unless another call has remembered more draws meanwhile
            kept = memory.get("candidate bases", key)
            if kept is None or kept[1] < 1 + stop:
                memory.put("candidate bases", key, (bases, 1 + stop))

        null_bases(basis.d, k, n_null, seed, first=count - 1, out=bases[count:1 + n_null], pause=pause, drawn=drawn)
    return key, bases[:1 + n_null]


def ready_bases(basis: ReadoutBasis, settings: PGASettings, device: str = "auto", memory: EngineMemory | None = None,
                pause: Callable[[], None] | None = None) -> None:
    """The candidate bases of each k of ``settings`` (V_k and its R null draws) in ``memory`` (default: the
    process's), as :func:`pga_sweep` of ``settings`` takes them: a sweep there then projects at once. A jump's preview
    to k = 1024 at d = 2048 spent 2 of its 4 s on 2 cores drawing its 20 bases."""
    for k in settings.ks:
        _candidates(memory or default_memory(), basis, k, settings.n_null, settings.seed, _projection_dtype(settings),
                    pick_device(device), pause)


def _projection_dtype(settings: PGASettings) -> torch.dtype:
    return torch.bfloat16 if settings.projection == "bfloat16" else torch.float32


@dataclass(frozen=True)
class PairDesign:
    """Which pairs are scored: the tokens taken in ``order`` ``[B * b]`` fall into B consecutive blocks of
    ``block`` = b tokens (one block of all N for all pairs), and the chosen pairs are flat indices into the
    blocks' ``[B, b, b]`` Gram matrices."""

    order: np.ndarray
    block: int
    flat: np.ndarray

    @property
    def n_pairs(self) -> int:
        return len(self.flat)

    @property
    def ordered(self) -> bool:
        """Whether the tokens are taken in another order (blocks): else in their own, all of them."""
        return self.block != len(self.order)

    @cached_property
    def rows(self) -> PairRows:
        """The pairs grouped by the token of their row, for :func:`analysis.geometry.ranks.spearman_cosines`."""
        return pair_rows(self.flat, self.block, len(self.order), self.order if self.ordered else None)


def sample_pairs(n: int, max_pairs: int | None, seed: int, pair_blocks: int | None = None) -> PairDesign:
    """All pairs i < j; or a seeded uniform sample of ``max_pairs``; or every pair inside ``n // b`` seeded
    random blocks of ``b = pair_blocks`` tokens (all pairs when fewer than two blocks fit)."""
    if pair_blocks is not None and n >= 2 * pair_blocks:
        blocks = np.sort(np.random.default_rng([seed, n, pair_blocks]).permutation(n)[:n - n % pair_blocks]
                         .reshape(-1, pair_blocks), axis=1)
        rows, cols = np.triu_indices(pair_blocks, 1)
        flat = np.arange(len(blocks))[:, None] * pair_blocks**2 + rows * pair_blocks + cols
        return PairDesign(blocks.ravel(), pair_blocks, flat.ravel())
    rows, cols = np.triu_indices(n, 1)
    flat = rows * n + cols
    if max_pairs is not None and max_pairs < len(flat):
        flat = np.sort(np.random.default_rng([seed, n]).choice(flat, max_pairs, replace=False))
    return PairDesign(np.arange(n), n, flat)


def _design_with_rows(*args) -> tuple[PairDesign, PairRows]:
    """:func:`sample_pairs` of ``args`` and its rows, both made now: remembered together (the app sweeps a layer a
    call, and making them took 2-3 ms a call at N = 512, a fifth of a layer's exact sweep at k = 1)."""
    design = sample_pairs(*args)
    return design, design.rows


def _cosine_grams(points: torch.Tensor, block: int) -> torch.Tensor:
    """``[m, B * block * block]`` float32: the cosine similarities inside each block of ``block`` consecutive tokens of
    ``points`` ``[m, B * block, k]`` (tokens in the design's order), one Gram matrix per subspace and block, flattened
    (a design's ``flat`` picks its pairs; for sampled pairs too, a batched matmul beats gathering each pair's rows)."""
    unit = torch.nn.functional.normalize(points, dim=-1).reshape(len(points), -1, block, points.shape[-1])
    return (unit @ unit.transpose(-1, -2)).reshape(len(points), -1)


def _project(points: torch.Tensor, bases: torch.Tensor, out: torch.Tensor | None = None,
             pause: Callable[[], None] | None = None) -> torch.Tensor:
    """``[m, n, k]`` float32: ``points`` ``[n, d]`` projected onto each basis of ``bases`` ``[m, d, k]``, multiplied in
    the bases' dtype; into ``out`` when given (a slice of a larger projection: no copy to join them after). ``pause``:
    called between chunks of ``CHUNK_SUBSPACES`` subspaces where k is large (a layer's 101 projections at d = 2048,
    k = 1024 are 1.1 s on 2 AVX2 cores), fewer where n d k is large (``CHUNK_PROJECTED`` a chunk at most)."""
    m, d, k = bases.shape
    chunk = max(1, min(CHUNK_SUBSPACES, CHUNK_PROJECTED // (len(points) * d * k)))
    if pause is not None and k >= BATCHED_FROM_K and m > chunk:
        out = torch.empty((m, len(points), k), device=points.device) if out is None else out
        for start in range(0, m, chunk):
            if start:
                pause()
            _project(points, bases[start:start + chunk], out[start:start + chunk])
        return out
    points = points.to(bases.dtype)
    if k >= BATCHED_FROM_K:  # one batched matmul straight into [m, n, k]
        if out is not None and bases.dtype == torch.float32:
            return torch.matmul(points[None], bases, out=out)
        projected = torch.matmul(points[None], bases).float()
    else:  # one wide matmul, then [m, n, k] (3x faster Grams after)
        projected = (points @ bases.permute(1, 0, 2).reshape(d, m * k)).float().reshape(len(points), m, k)
        projected = projected.permute(1, 0, 2)
    return projected.contiguous() if out is None else out.copy_(projected)


@dataclass(frozen=True)
class _Projection:
    """A layer's CCR-0 projection ``P_0 = (H - mu) B`` ``[m, n, K]`` onto ``bases`` ``[m, d, K]``."""

    bases: torch.Tensor
    projection: torch.Tensor

    def serves(self, bases: torch.Tensor) -> bool:
        """Whether it holds the first ``len(bases)`` subspaces of ``bases`` ``[m, d, k]`` (at some width): enough
        draws and the same readout (which draws they are is fixed by the key it is remembered under)."""
        shared = min(bases.shape[-1], self.bases.shape[-1])
        return len(self.bases) >= len(bases) and torch.equal(self.bases[0, :, :shared], bases[0, :, :shared])


def _preview_projection(centred: torch.Tensor, corrected: Callable[[], torch.Tensor], pca: PCA, c: int,
                        bases: torch.Tensor, remembered: tuple | None, memory: EngineMemory,
                        hand: tuple | None, pause: Callable[[], None] | None = None) -> torch.Tensor:
    """:func:`_project` of the CCR-c states for a preview, from the layer's CCR-0 projection ``P_0 = (H - mu) B``
    (``centred`` = H - mu ``[n, d]`` float32) remembered under ``remembered`` (its key; None to keep nothing), by a
    preview or an exact sweep (see :func:`_remember_projection`):
    - a move of k: the bases are nested (V_k is the readout's top k, a null draw's first k columns are its basis at
      k), so ``P_0`` at the widest k so far serves every smaller k, and a larger k projects only the columns it adds;
    - the null draws are nested in R too, so ``P_0`` of more subspaces serves a preview of its first m;
    - a move of CCR depth: ``(H - mu)(I - U_c U_c^T) B = P_0 - ((H - mu) U_c)(U_c^T B)``, ``n c k`` per subspace
      instead of ``n d k``.
    Equal to the direct projection up to float32 rounding (tested). A jump (at most a quarter of the k columns
    remembered), given ``hand`` (group, key): the CCR-c states ``corrected`` projected as the exact run projects its
    first subspaces (:func:`_exact_projection`), and handed over to it in ``memory``, so that what the preview
    projects the exact run after it does not project again. ``pause``: as :func:`_project` takes it."""
    m, _, k = bases.shape
    kept = None if remembered is None else memory.get("CCR-0 projection", remembered)
    if kept is not None and not kept.serves(bases):
        kept = None
    if kept is None or kept.bases.shape[-1] < k:
        have = 0 if kept is None else kept.bases.shape[-1]
        if hand is not None and 4 * have <= k:
            projected = _project(corrected(), bases, pause=pause)
            memory.hand_over(*hand, projected)
            if remembered is not None:
                _remember_projection(centred, pca, c, bases, projected, remembered, memory)
            return projected
        added = _project(centred, bases[..., have:], pause=pause)
        kept = _Projection(bases, added if kept is None else torch.cat([kept.projection[:m], added], dim=-1))
        if remembered is not None:
            memory.put("CCR-0 projection", remembered, kept)
    zero = kept.projection[:m, :, :k]
    return _plus_removed(zero, centred, pca, c, bases, -1) if c else zero


def _exact_projection(corrected: torch.Tensor, bases: torch.Tensor, first: int,
                      head: Callable[[torch.Tensor], object] | None, pause: Callable[[], None] | None = None):
    """:func:`_project` of the CCR-c states ``corrected`` ``[n, d]`` onto ``bases`` ``[m, d, k]`` for an exact sweep:
    the first ``first`` subspaces (those a preview scores) projected apart from the rest, or written by ``head(out)``
    (``out`` ``[first, n, k]``) where a preview or an earlier sweep left them (:func:`_projected_head`). Both parts are
    written into one tensor (joining them after cost a copy of the whole projection: 2.2 s of a 13.7 s sweep at
    k = 288). ``pause``: as :func:`_project` takes it."""
    m, _, k = bases.shape
    if not first:
        return _project(corrected, bases, pause=pause)
    projected = torch.empty((m, len(corrected), k), device=corrected.device)
    if head is None:
        _project(corrected, bases[:first], out=projected[:first], pause=pause)
    else:
        head(projected[:first])
    if m > first:
        _project(corrected, bases[first:], out=projected[first:], pause=pause)
    return projected


def _projected_head(memory: EngineMemory, hand: tuple | None, remembered: tuple | None, centred: torch.Tensor,
                    pca: PCA, c: int, bases: torch.Tensor) -> Callable[[torch.Tensor], object] | None:
    """What writes an exact sweep's projection onto its first subspaces ``bases`` ``[m, d, k]`` without projecting
    them: the preview's projection handed over under ``hand`` (a jump: the same call as the sweep's own, so the same
    bits), else the layer's CCR-0 projection remembered under ``remembered`` at k or wider (a move: ``P_0`` less what
    CCR-c removes, :func:`_plus_removed`, equal up to float32 rounding); None when neither is there."""
    handed = None if hand is None else memory.take(*hand)
    if handed is not None:
        return lambda out: out.copy_(handed)
    kept = None if remembered is None else memory.get("CCR-0 projection", remembered)
    if kept is None or not kept.serves(bases) or kept.bases.shape[-1] < bases.shape[-1]:
        return None
    zero = kept.projection[:len(bases), :, :bases.shape[-1]]
    return lambda out: _plus_removed(zero, centred, pca, c, bases, -1, out) if c else out.copy_(zero)


def _plus_removed(projection: torch.Tensor, centred: torch.Tensor, pca: PCA, c: int, bases: torch.Tensor,
                  sign: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """``projection + sign ((H - mu) U_c)(U_c^T B)`` ``[m, n, k]`` float32, in one batched multiply-add (into ``out``
    when given): the projection onto ``bases`` ``[m, d, k]`` with what CCR-c takes out of it (``sign`` -1) or put back
    (+1); ``centred`` = H - mu ``[n, d]`` float32."""
    top = pca.components[:, :c].float()
    return torch.baddbmm(projection, (centred @ top).expand(len(bases), -1, -1), top.T @ bases.float(), alpha=sign,
                         out=out)


def _remember_projection(centred: torch.Tensor, pca: PCA, c: int, bases: torch.Tensor, projected: torch.Tensor,
                         remembered: tuple, memory: EngineMemory) -> None:
    """An exact sweep's CCR-c projection ``projected`` ``[m, n, k]`` onto ``bases`` ``[m, d, k]`` (its first m
    subspaces) of the states ``centred`` (H - mu, float32), turned back into ``P_0 = P_c + ((H - mu) U_c)(U_c^T B)``
    and remembered for the previews of these states (:func:`_preview_projection`), unless a projection at least as
    wide is remembered already."""
    kept = memory.get("CCR-0 projection", remembered)
    if kept is not None and kept.serves(bases) and kept.bases.shape[-1] >= bases.shape[-1]:
        return
    zero = _plus_removed(projected, centred, pca, c, bases, 1) if c else projected
    memory.put("CCR-0 projection", remembered, _Projection(bases, zero.contiguous()))


def _float32(states: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``states()`` as float32."""
    return states().to(torch.float32)


def _reference(corrected: Callable[[], torch.Tensor], design: PairDesign) -> RankedReference:
    """The full space's cosine similarities of the CCR-c states ``corrected()`` ``[n, d]`` at the design's pairs,
    ranked."""
    states = corrected()
    if design.ordered:  # blocks: the tokens in block order, each block consecutive
        states = states[torch.as_tensor(design.order, device=states.device)]
    flat = torch.as_tensor(design.flat, device=states.device)
    return ranked_reference(_cosine_grams(states[None], design.block)[0, flat])


def _subspace_rhos(reference: RankedReference, projected: torch.Tensor, design: PairDesign,
                   pause: Callable[[], None] | None = None) -> np.ndarray:
    """Spearman rho of full-space vs projected similarities: ``reference`` (:func:`_reference`) against each subspace's
    ``projected`` ``[m, n, k]`` (:func:`_project`, its tokens taken in the design's order). ``pause`` is called before
    each ``CHUNK_SUBSPACES`` subspaces after the first. On the CPU each core makes its subspaces' Gram matrices a chunk
    at a time (numpy, one BLAS thread) and ranks their pairs from its cache
    (:func:`analysis.geometry.ranks.spearman_cosines`); elsewhere the Gram matrices of a chunk of subspaces at once
    (as many as ``MEMORY_BUDGET_BYTES`` holds), then their ranks."""
    if projected.device.type == "cpu":
        with one_blas_thread():
            return spearman_cosines(reference, projected.numpy(), design.rows, pause, CHUNK_SUBSPACES).numpy()
    m = len(projected)
    flat = torch.as_tensor(design.flat, device=projected.device)
    order = torch.as_tensor(design.order, device=projected.device) if design.ordered else None
    per_subspace = (len(design.order) * design.block + design.n_pairs) * 4  # its Gram matrices and pairs, float32
    chunk = max(1, min(CHUNK_SUBSPACES, MEMORY_BUDGET_BYTES // per_subspace))
    rhos = []
    for start in range(0, m, chunk):
        if start and pause is not None:
            pause()
        part = projected[start:start + chunk] if order is None else projected[start:start + chunk, order]
        rhos.append(spearman_ranked(reference, _cosine_grams(part, design.block), flat))
    return torch.cat(rhos).cpu().numpy()


PCA_KEPT = 32  # components kept per layer: CCR depths and PC angles up to this need no new PCA


def _pca_key(states: torch.Tensor) -> tuple:
    return (hashlib.blake2b(states.contiguous().cpu().numpy(), digest_size=16).digest(), tuple(states.shape),
            str(states.dtype), str(states.device))


def _rows_key(rows: torch.Tensor, memory: EngineMemory, states_key: str | None, which: tuple) -> tuple:
    """:func:`_pca_key` of ``rows``, remembered under ``(states_key, which)`` where the caller names its states
    (hashing a layer's rows takes 4-7 ms at d = 1024-2048, a tenth of a layer's preview)."""
    if states_key is None:
        return _pca_key(rows)
    return memory.remember("rows key", (states_key, *which, str(rows.device)), lambda: _pca_key(rows))


def _covers(pca: PCA | None, needed: int) -> bool:
    """A remembered PCA holds the top ``needed`` components (or all the rows have)."""
    return pca is not None and pca.components.shape[1] >= min(needed, pca.variances.numel())


def _fit_split(settings: PGASettings) -> tuple:
    """Which rows CCR is fitted on and which are scored, as the engine's memory names them (:func:`_rows_key`)."""
    return settings.ccr_fit, None if settings.ccr_fit == "same" else settings.seed


def layer_pcas(rows: list[torch.Tensor], needed: int, memory: EngineMemory | None = None,
               keys: list[tuple | None] | None = None) -> list[PCA]:
    """``fit_pca`` of each layer's ``rows`` with at least ``needed`` components, remembered in ``memory`` (the top
    ``max(needed, 32)`` components, every variance) by the rows' bytes and device (``keys``: their :func:`_pca_key`,
    when the caller has them); those not remembered are fitted a layer per core
    (:func:`analysis.geometry.ccr.fit_pcas`)."""
    memory = memory or default_memory()
    keys = [key or _pca_key(states) for states, key in zip(rows, keys or [None] * len(rows), strict=True)]
    found = [memory.get("pca", key) for key in keys]
    missing = [i for i, pca in enumerate(found) if not _covers(pca, needed)]
    for i, fitted in zip(missing, fit_pcas([rows[i] for i in missing], max(needed, PCA_KEPT)), strict=True):
        found[i] = memory.put("pca", keys[i], PCA(fitted.mean, fitted.components.contiguous(), fitted.variances))
    return found


@storable
@dataclass(frozen=True)
class FittedPCA:
    """One layer's PCA as :func:`pga_sweep` fits it (the top ``PCA_KEPT`` components, every variance), to be
    stored beside the hidden states: the digest of the rows it was fitted on, a mean ``[d]``, components
    ``[d, r]`` and variances ``[v]``."""

    digest: str
    mean: np.ndarray
    components: np.ndarray
    variances: np.ndarray


def fit_layer_pcas(states: np.ndarray, layers: list[int], settings: PGASettings, device: str = "auto",
                   memory: EngineMemory | None = None) -> list[FittedPCA]:
    """Each of ``layers``' PCA of ``states`` ``[L, N, d]`` (the rows :func:`pga_sweep` fits on), remembered in
    ``memory`` as the sweep would (so the next sweep or preview of these states starts warm: the PCA is ~40 %
    of a preview's time), as arrays to store; fitted a layer per core (:func:`_fit_layers`)."""
    fitted = _fit_layers(states, layers, _fit_index(states.shape[1], settings), pick_device(device),
                         max(settings.n_pcs, *settings.ccrs), memory or default_memory(),
                         lambda _layer, rows: _pca_key(rows), None)
    return [FittedPCA(key[0].hex(), *(t.cpu().numpy() for t in (pca.mean, pca.components, pca.variances)))
            for key, pca in (fitted[layer] for layer in layers)]


def remember_fitted(states: np.ndarray, layer: int, settings: PGASettings, fitted: FittedPCA,
                    device: str = "auto", memory: EngineMemory | None = None) -> bool:
    """Put a stored PCA (:func:`fit_layer_pcas` of these states, layer and settings) into ``memory`` as
    :func:`layer_pcas` would; False, and nothing remembered, when the rows are not the ones it was fitted on."""
    rows = _fit_rows(states, layer, settings, device)
    key = _pca_key(rows)
    if key[0].hex() != fitted.digest:
        return False
    (memory or default_memory()).put("pca", key, PCA(*(torch.as_tensor(a, device=rows.device) for a in
                                                        (fitted.mean, fitted.components, fitted.variances))))
    return True


def _fit_index(n: int, settings: PGASettings) -> np.ndarray | None:
    """The rows of ``n`` that CCR is fitted on (:func:`_split`); None when it is fitted on all of them."""
    return None if settings.ccr_fit == "same" else _split(n, settings.ccr_fit, settings.seed)[0]


def _fit_rows(states: np.ndarray, layer: int, settings: PGASettings, device: str) -> torch.Tensor:
    x = torch.as_tensor(states[layer], device=pick_device(device))
    index = _fit_index(states.shape[1], settings)
    return x if index is None else x[index]


def _zscore(rho: float, null: np.ndarray) -> np.ndarray:
    """z along the last axis of ``null``; NaN where the null has no spread (e.g. k = d)."""
    spread = null.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spread > 0, (rho - null.mean(axis=-1)) / spread, np.nan)


def _z_interval(rho: float, null: np.ndarray, n_bootstrap: int, rng: np.random.Generator):
    z = _zscore(rho, null[rng.integers(0, len(null), (n_bootstrap, len(null)))])
    z = z[np.isfinite(z)]
    if len(z) == 0:
        return math.nan, math.nan
    low, high = np.percentile(z, [2.5, 97.5])
    return float(low), float(high)


def _readout_variances(fitted: torch.Tensor, pca: PCA, readout: torch.Tensor, memory: EngineMemory,
                       key: tuple) -> torch.Tensor:
    """``[K]`` float64, ``K >= k``: the fitted rows' variance along each of the readout's first K directions,
    ``||(H - mu) v_j||^2 / (n - 1)`` for the rows ``H`` ``[n, d]`` and ``readout`` V_k ``[d, k]``. V_k is nested in k,
    so ``trace(V_k^T C V_k)`` (= sum_i lambda_i ||V_k^T u_i||^2) is the sum of the first k: remembered in ``memory``
    under ``key`` (the rows and the basis) and grown by the directions a larger k adds, so a move of k costs nothing
    here (31 products [n, d] x [d, k] in float64 were a fifth of a preview)."""
    kept = memory.get("readout variances", key)
    have = 0 if kept is None else len(kept)
    if have < readout.shape[1]:
        centred = fitted.to(torch.float64) - pca.mean
        added = (centred @ readout[:, have:]).square().sum(0) / max(len(fitted) - 1, 1)
        kept = memory.put("readout variances", key, added if kept is None else torch.cat([kept, added]))
    return kept


def _angles(pca: PCA, readout_k: torch.Tensor, n_pcs: int) -> tuple[np.ndarray, np.ndarray]:
    """(angles ``[n_pcs]`` in degrees, their shares inside V_k): the layer's principal directions against
    ``readout_k`` V_k ``[d, k]``, the same at every CCR depth; NaN where the states are all alike (no direction)."""
    inside = (pca.components[:, :n_pcs].T @ readout_k).norm(dim=1).clamp(max=1.0)  # 7 ms the other way at d = 2048
    angles, shares = torch.rad2deg(torch.arccos(inside)).cpu().numpy(), (inside**2).cpu().numpy()
    if float(pca.variances.sum()) <= 0:
        return np.full_like(angles, np.nan), np.full_like(shares, np.nan)
    return angles, shares


def remembered_shapes(states: np.ndarray, basis: ReadoutBasis, settings: PGASettings, layers: list[int],
                      device: str = "auto", memory: EngineMemory | None = None,
                      states_key: str | None = None) -> list[LayerShape]:
    """:class:`LayerShape` of ``states`` ``[L, N, d]`` at every (k, CCR depth) of ``settings``, at those of ``layers``
    whose PCA ``memory`` holds (:func:`pga_sweep` left it there; nothing is fitted, no pair scored): a preview at a
    few layers draws its lower charts whole with them, as the exact run will. Equal to :func:`pga_sweep`'s fields.
    Empty where CCR is fitted on half the rows (the corrected states' spectrum is then fitted afresh)."""
    if settings.ccr_fit != "same":
        return []
    memory, torch_device, needed = memory or default_memory(), pick_device(device), max(settings.n_pcs, *settings.ccrs)
    readouts = {k: torch.as_tensor(basis.top(k), device=torch_device) for k in settings.ks}
    shapes = []
    for layer in sorted({layer % len(states) for layer in layers}):
        rows = torch.as_tensor(states[layer], device=torch_device)
        pca = memory.get("pca", _rows_key(rows, memory, states_key, (layer, "fitted", *_fit_split(settings))))
        if not _covers(pca, needed):
            continue
        directions = {k: _angles(pca, readouts[k], settings.n_pcs) for k in settings.ks}
        for c in settings.ccrs:  # in the sweep's order
            spectrum = spectral_metrics(pca.variances[c:].cpu().numpy(), states.shape[2], settings.alpha_fit)
            shapes += [LayerShape(layer, k, c, *directions[k], **spectrum) for k in settings.ks]
    return shapes


def _split(n: int, how: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows to fit CCR on, rows to score)."""
    if how == "same":
        rows = np.arange(n)
        return rows, rows
    order = np.random.default_rng([seed, n, 2]).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def _fit_layers(states: np.ndarray, layers: list[int], fit_rows: np.ndarray | None, device: torch.device, needed: int,
                memory: EngineMemory, key: Callable[[int, torch.Tensor], tuple],
                pause: Callable[[], None] | None) -> dict[int, tuple[tuple, PCA]]:
    """Each layer's key (``key(layer, rows)``) and PCA of its ``fit_rows`` (None: all, not copied), remembered in
    ``memory`` (:func:`layer_pcas`). On the CPU a layer per core, ``pause`` between the groups: LAPACK's
    tridiagonal reduction, most of a PCA, runs on one core, so one layer at a time would leave the others idle."""
    group_size = WORKERS if device.type == "cpu" else len(layers)
    fitted = {}
    for first in range(0, len(layers), group_size):
        if first and pause is not None:
            pause()
        group = layers[first:first + group_size]
        rows = [torch.as_tensor(states[layer], device=device) for layer in group]
        rows = rows if fit_rows is None else [x[fit_rows] for x in rows]
        keys = [key(layer, x) for layer, x in zip(group, rows, strict=True)]
        try:
            pcas = layer_pcas(rows, needed, memory, keys)
        except torch.OutOfMemoryError:
            raise InputError(f"Out of memory at layer {group[0]}: lower N or use the CPU.") from None
        fitted.update(zip(group, zip(keys, pcas, strict=True), strict=True))
    return fitted


def pga_sweep(states: np.ndarray, basis: ReadoutBasis, settings: PGASettings,
              layers: list[int] | None = None, device: str = "auto",
              progress: Progress | None = None, pause: Callable[[], None] | None = None,
              memory: EngineMemory | None = None, for_previews: int = 0,
              states_key: str | None = None) -> list[LayerPGA]:
    """PGA for every layer in ``layers`` x k in ``settings.ks`` x CCR depth in ``settings.ccrs``.

    ``states`` is ``[L, N, d]`` (or ``[N, d]``). Reused across the sweep: each layer's PCA (for all
    CCR depths), each (layer, CCR) full-space ranks (for all k), each k's null bases (for all layers).
    ``pause``: called between layers and every few subspaces, where the caller may let more urgent work run
    first (the dashboard's admission policy hands the cores to a visitor's preview there). ``memory``: where PCAs
    and candidate bases are remembered (default: the process's). ``for_previews``: an exact sweep leaves in ``memory``
    each layer's CCR-0 projection onto its readout and first ``for_previews - 1`` null draws, which a preview of R' =
    ``for_previews - 1`` draws then needs not project again (a slider move right after the exact curve), nor the exact
    sweep of a move after it, at another depth or a k that ``P_0`` covers (the move's preview widens it): those first
    subspaces come from ``P_0`` (:func:`_projected_head`). A preview on every pair leaves in ``memory`` the rho of
    each subspace it scored (the readout and the first R' draws, the exact sweep's own), and an exact sweep of the same
    states, depth, k and draws scores only the others.
    ``states_key``: a name the caller gives these very states (e.g. the key of the spec they were computed from), under
    which each layer's digest is remembered instead of hashed at every call. Returns one :class:`LayerPGA` per
    (layer, k, ccr), layer-major.
    """
    layers = None if layers is None else [int(i) for i in layers]
    states = validate_states(states, basis.d, layers)
    n_layers, n_total, d = states.shape
    layers = list(range(n_layers)) if layers is None else layers
    fit_rows, score_rows = _split(n_total, settings.ccr_fit, settings.seed)
    n = len(score_rows)
    require(n >= 3, f"N = {n} scored token positions; PGA needs N >= 3.")
    for c in settings.ccrs:
        require(c < min(len(fit_rows), d), f"CCR depth {c} is too large: it must be below "
                                           f"min(N, d) = {min(len(fit_rows), d)}.")
    for k in settings.ks:
        basis.top(k)
    torch_device = pick_device(device)
    memory = memory or default_memory()
    design_key = (n, settings.max_pairs, settings.seed, settings.pair_blocks)
    design, _ = memory.remember("pair design", design_key, partial(_design_with_rows, *design_key))
    projection = _projection_dtype(settings)
    candidates = {k: _candidates(memory, basis, k, settings.n_null, settings.seed, projection, torch_device, pause)
                  for k in settings.ks}
    # the CCR-0 projections onto the subspaces a preview scores are kept, for every layer of the states, while they fit
    # in ``PROJECTIONS_SHARE`` of the engine's memory (every layer, not only those asked for now: the dashboard asks
    # for one at a time); an exact sweep leaves those of its first ``for_previews`` subspaces
    kept_subspaces = settings.n_null + 1 if settings.preview else min(for_previews, settings.n_null + 1)
    keep_projections = 0 < kept_subspaces and (
        n_layers * kept_subspaces * n * sum(settings.ks) * 4 <= memory.limit_bytes * PROJECTIONS_SHARE)
    # a preview on every pair scores the exact sweep's first subspaces: it leaves their rhos, which the exact sweep
    # after it takes; a preview's jump on sampled pairs hands its float32 projections over to the exact sweep after it,
    # which scores the same first subspaces (``for_previews``)
    every_pair = settings.max_pairs is None and settings.pair_blocks is None
    hands = 0 < kept_subspaces and projection == torch.float32 and not (settings.preview and every_pair)
    readouts = {k: torch.as_tensor(basis.top(k), device=torch_device) for k in settings.ks}
    same_rows = settings.ccr_fit == "same"
    split = _fit_split(settings)
    results, total, done = [], len(layers) * len(settings.ccrs) * len(settings.ks), 0
    needed = max(settings.n_pcs, *settings.ccrs)
    fitted_layers = _fit_layers(states, [layer % n_layers for layer in layers], None if same_rows else fit_rows,
                                torch_device, needed, memory,
                                lambda i, fitted: _rows_key(fitted, memory, states_key, (i, "fitted", *split)), pause)
    for number, layer in enumerate(layers):
        if number and pause is not None:
            pause()
        layer = layer % n_layers
        x = torch.as_tensor(states[layer], device=torch_device)
        fitted, scored = (x, x) if same_rows else (x[fit_rows], x[score_rows])
        fit_key, pca = fitted_layers[layer]
        scored_key = fit_key if same_rows else _rows_key(scored, memory, states_key, (layer, "scored", *split))
        centred_cov_trace = float(pca.variances.sum())
        centred = scored.to(torch.float64) - pca.mean
        centred32 = centred.float()
        for c in settings.ccrs:
            # the CCR-c states (float64, float32), each made once and only when needed: a preview on remembered
            # projections needs neither
            corrected = cache(partial(project_out, centred, pca, c))
            corrected32 = cache(partial(_float32, corrected))
            # fitted on the scored rows, the corrected states' spectrum is the PCA's without its top c values
            variances = pca.variances[c:] if same_rows else fit_pca(corrected()).variances
            spectrum = spectral_metrics(variances.cpu().numpy(), d, settings.alpha_fit)
            # the same for every k: remembered by the rows, the depth and the design (a move of k needs it again)
            reference = memory.remember("reference", (fit_key, scored_key, c, design_key),
                                        partial(_reference, corrected32, design))
            for k in settings.ks:
                report(progress, "PGA by layer", done, total)
                bases_key, bases = candidates[k]
                # the bases' key without V_k's name: one projection serves every k and every R up to its own
                remembered = (scored_key, *bases_key[1:]) if keep_projections else None
                hand = (("exact projection", *bases_key, kept_subspaces), (scored_key, c)) if hands else None
                scored_rhos = (fit_key, scored_key, c, design_key, bases_key)
                known = None if settings.preview else memory.get("leading rhos", scored_rhos)
                if known is not None:  # a preview on every pair scored the first subspaces: only the rest now
                    rest = bases[len(known):]
                    rhos = np.concatenate([known, _subspace_rhos(reference, _project(corrected32(), rest, pause=pause),
                                                                 design, pause)]) if len(rest) else known[:len(bases)]
                else:
                    if settings.preview:
                        projected = _preview_projection(centred32, corrected32, pca, c, bases, remembered, memory,
                                                        hand, pause)
                    else:
                        head = _projected_head(memory, hand, remembered, centred32, pca, c, bases[:kept_subspaces])
                        projected = _exact_projection(corrected32(), bases, kept_subspaces, head, pause)
                        if remembered is not None and c == settings.ccrs[0]:
                            _remember_projection(centred32, pca, c, bases[:kept_subspaces],
                                                 projected[:kept_subspaces], remembered, memory)
                    rhos = _subspace_rhos(reference, projected, design, pause)
                    if settings.preview and every_pair:
                        memory.put("leading rhos", scored_rhos, rhos)
                rho, null = float(rhos[0]), rhos[1:]
                angles, shares = _angles(pca, readouts[k], settings.n_pcs)  # the same at every CCR depth
                in_readout = float(_readout_variances(fitted, pca, readouts[k], memory,
                                                      (fit_key, basis.digest))[:k].sum())
                rng = np.random.default_rng([settings.seed, layer, k, c])
                results.append(LayerPGA(
                    layer=layer, k=k, ccr=c, n_tokens=n, n_pairs=design.n_pairs, rho_readout=rho, null=null,
                    z=float(_zscore(rho, null)),
                    z_interval=_z_interval(rho, null, settings.n_bootstrap, rng),
                    p_value=float((1 + (null >= rho).sum()) / (1 + len(null))) if math.isfinite(rho) else math.nan,
                    pc_angles_deg=angles, pc_share_in_readout=shares,
                    variance_in_readout=in_readout / centred_cov_trace if centred_cov_trace > 0 else math.nan,
                    **spectrum,
                ))
                done += 1
    report(progress, "PGA by layer", total, total)
    return results
