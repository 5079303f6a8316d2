"""Result collections: what an analysis returns, with the settings it actually used, its table (the
rows every page, export and the CLI show) and its plotly figures. No math beyond arranging numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.capacity import atlas
from analysis.capacity.epsilon import CosineStats, Histogram, MatrixGeometry
from analysis.capacity.formulas import FORMULAS, CapacityReport, capacity_curves, epsilon_curves
from analysis.capacity.packing import PackingCell
from analysis.errors import require
from analysis.geometry.convergence import LayerConvergence
from analysis.geometry.pga import LayerPGA, LayerShape, PGASettings
from analysis.geometry.probes import ProbeResult
from analysis.geometry.readout import ReadoutBasis
from analysis.geometry.verdict import Verdict
from analysis.results import figures

NULL_COLUMNS = ("z", "z_low", "z_high", "rho_readout", "null_mean", "null_std", "p_value")


def pga_rows(results: list[LayerPGA | LayerShape]) -> list[dict]:
    """One row per (layer, k, CCR): z with its interval, the null, PC angles, spectral metrics; a
    :class:`LayerShape` (a layer a preview has no z at) leaves the null's columns and the variance in V_k empty."""
    return [{"layer": r.layer, "k": r.k, "ccr": r.ccr, **_null_columns(r),
             **{f"pc{i + 1}_deg": float(a) for i, a in enumerate(r.pc_angles_deg)},
             "variance_in_readout": r.variance_in_readout if isinstance(r, LayerPGA) else math.nan,
             "rankme": r.rankme, "alpha_req": r.alpha_req, "isotropy": r.isotropy,
             "condition_number": r.condition_number} for r in results]


def _null_columns(r: LayerPGA | LayerShape) -> dict:
    if isinstance(r, LayerShape):
        return dict.fromkeys(NULL_COLUMNS, math.nan)
    return dict(zip(NULL_COLUMNS, (r.z, *r.z_interval, r.rho_readout, r.null_mean, r.null_std, r.p_value),
                    strict=True))


def preview_words(settings: dict, pairs: str) -> str:
    """What a preview (``PGASettings.spec``) was computed on: "32,512 pairs inside blocks of 128 tokens,
    30 null draws, bfloat16 projection"."""
    words = [pairs + (f" inside blocks of {settings['pair_blocks']} tokens" if settings.get("pair_blocks") else ""),
             f"{settings['n_null']} null draws"]
    words += ["bfloat16 projection"] if settings.get("projection") == "bfloat16" else []
    return ", ".join(words)


@dataclass(frozen=True)
class PGARun:
    """Per-layer PGA at every (k, CCR depth) of ``settings``, layer-major, with what it was computed on."""

    results: tuple[LayerPGA, ...]
    settings: PGASettings
    model: str = ""
    identity: str | None = None
    dtype: str | None = None
    provenance: dict | None = field(default=None, compare=False)
    preview: bool = False  # computed on less work (``preview_settings``); the exact run replaces it
    of_layers: int | None = None  # a preview of some of the layers: how many the states have
    exact_layers: tuple[int, ...] = ()  # a preview's layers that hold the exact run's results (:meth:`with_exact`)
    shapes: tuple[LayerShape, ...] = ()  # a preview at some layers: the others' for the lower charts (:meth:`shaped`)

    @property
    def n_tokens(self) -> int:
        return self.results[0].n_tokens

    @property
    def n_pairs(self) -> int:
        return self.results[0].n_pairs

    @property
    def preview_work(self) -> str:
        """What a preview was computed on, in words: first the exact run's layers in it (:meth:`with_exact`)."""
        of = f" of {self.of_layers} layers (the others follow)" if self.of_layers is not None else " layers"
        if not (self.settings.preview and self.exact_layers):
            pairs = f"{self.n_pairs:,} pairs"
            words = preview_words(self.settings.spec, pairs) if self.settings.preview else f"{pairs} (exact)"
            return words + (f", at {len(self.at())}{of}" if self.of_layers is not None else "")
        exact = next(r for r in self.results if r.layer in self.exact_layers)
        words = f"the exact run ({exact.n_pairs:,} pairs, {len(exact.null)} null draws) at {len(self.exact_layers)}"
        own = [r for r in self.results if r.layer not in self.exact_layers]
        if not own:
            return words + of
        preview = preview_words(self.settings.spec, f"{own[0].n_pairs:,} pairs")
        return (f"{words} layer{'s' * (len(self.exact_layers) != 1)} (filled markers) and {preview} at "
                f"{len({r.layer for r in own})} (open markers), "
                f"{len(self.at())}{of}")

    def with_exact(self, exact: list[LayerPGA], settings: PGASettings) -> PGARun:
        """This preview with the exact run's results (of ``settings``, at the same k and CCR depths) in place of its
        own at their layers, so that an exact curve is drawn layer by layer as it is stored; the exact run itself
        where they cover every layer."""
        if not exact:
            return self
        layers = {r.layer for r in exact}  # sorted stably below: each layer's k and CCR depths stay in order
        results = sorted([r for r in self.results if r.layer not in layers] + list(exact), key=lambda r: r.layer)
        shown, now_exact = {r.layer for r in results}, layers | set(self.exact_layers)
        complete = self.of_layers is None or len(shown) == self.of_layers
        if complete and shown <= now_exact:
            return replace(self, results=tuple(results), settings=settings, preview=False, of_layers=None,
                           exact_layers=())
        return replace(self, results=tuple(results), exact_layers=tuple(sorted(now_exact)),
                       of_layers=None if complete else self.of_layers)

    def at(self, k: int | None = None, ccr: int | None = None) -> list[LayerPGA]:
        """The per-layer results at one (k, CCR depth); the first of each by default."""
        k = self.settings.ks[0] if k is None else k
        ccr = self.settings.ccrs[0] if ccr is None else ccr
        chosen = [r for r in self.results if (r.k, r.ccr) == (k, ccr)]
        require(bool(chosen), f"No results at k = {k}, CCR-{ccr}; computed: k {list(self.settings.ks)}, "
                              f"CCR {list(self.settings.ccrs)}.")
        return chosen

    def describe(self, k: int | None = None, ccr: int | None = None) -> str:
        """The settings behind the numbers, as a caption states them."""
        k = self.settings.ks[0] if k is None else k
        ccrs = (ccr,) if ccr is not None else self.settings.ccrs
        depths = f"CCR-{ccrs[0]}" if len(ccrs) == 1 else "CCR " + ", ".join(map(str, ccrs))
        model = f", model {self.model}" if self.model else ""
        dtype = f", {self.dtype}" if self.dtype else ""
        pairs = f"Preview on {self.preview_work}" if self.preview else f"{self.n_pairs:,} pairs"
        draws = "" if self.preview and self.settings.preview else f"R = {self.settings.n_null} random subspaces, "
        return f"N = {self.n_tokens} tokens, {pairs}, k = {k}, {depths}, {draws}seed {self.settings.seed}{model}{dtype}"

    def error_bars(self) -> str:
        """What the z chart's error bars span, in words. A preview on blocks scores a quarter of the pairs, and its
        bars do not span the rest: they held the exact z at 59-100 % of the layers (BENCHMARKS.md)."""
        blocks = self.preview and self.settings.pair_blocks is not None and any(  # a layer of the preview's own
            r.layer not in self.exact_layers for r in self.results)
        return ("Error bars: 95 % bootstrap interval over the null draws" +
                (" (at the preview's own layers, over its draws on its pairs alone: the exact z may lie outside them)"
                 if blocks else "") + ".")

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(pga_rows(list(self.results)))

    def z_figure(self, ccrs: list[int] | None = None, k: int | None = None, title: str | None = None) -> go.Figure:
        """z by layer, one curve per CCR depth (all computed ones by default), at one k."""
        k = self.settings.ks[0] if k is None else k
        ccrs = list(self.settings.ccrs) if ccrs is None else ccrs
        title = title or f"z by layer at k = {k}, " + ", ".join(f"CCR-{c}" for c in ccrs)
        if self.preview:  # what it was computed on is in describe(), the caption
            title = "Preview: " + title
        return figures.z_by_layer({f"CCR-{c}": self.at(k, c) for c in ccrs}, title,
                                  set(self.exact_layers) if self.preview else None)

    def null_figure(self, layer: int, k: int | None = None, ccr: int | None = None) -> go.Figure:
        return figures.null_distribution(self.layer(layer, k, ccr))

    def null_table(self, layer: int, k: int | None = None, ccr: int | None = None) -> pd.DataFrame:
        return pd.DataFrame({"null_rho": self.layer(layer, k, ccr).null})

    def layer(self, layer: int, k: int | None = None, ccr: int | None = None) -> LayerPGA:
        """One layer's result at (k, CCR)."""
        chosen = [r for r in self.at(k, ccr) if r.layer == layer]
        require(bool(chosen), f"Layer {layer} was not computed; computed: {[r.layer for r in self.at(k, ccr)]}.")
        return chosen[0]

    def shaped(self, k: int | None = None, ccr: int | None = None) -> list[LayerPGA | LayerShape]:
        """:meth:`at` and, at the layers it lacks, ``shapes``: a preview at some layers draws its PC angles and
        spectral metrics at every layer whose PCA was at hand, as the exact run will (no null draw in them)."""
        results = self.at(k, ccr)
        k, ccr = results[0].k, results[0].ccr
        have = {r.layer for r in results}
        return sorted(results + [s for s in self.shapes if (s.k, s.ccr) == (k, ccr) and s.layer not in have],
                      key=lambda r: r.layer)

    def lower_table(self, k: int | None = None, ccr: int | None = None) -> pd.DataFrame:
        """The lower charts' numbers: :meth:`shaped`'s rows (at the layers a preview has no z at, z and the null
        empty)."""
        return pd.DataFrame(pga_rows(self.shaped(k, ccr)))

    def pc1_figure(self, k: int | None = None, ccr: int | None = None) -> go.Figure:
        return figures.pc_angle_by_layer(self.shaped(k, ccr))

    def pc_heatmap(self, k: int | None = None, ccr: int | None = None) -> go.Figure:
        return figures.pc_angle_heatmap(self.shaped(k, ccr))

    def spectral_figure(self, k: int | None = None, ccr: int | None = None) -> go.Figure:
        return figures.spectral_small_multiples(self.at(k, ccr), self.shaped(k, ccr))

    def to_json(self) -> dict:
        """The CLI's ``pga`` contract."""
        runs = [{"k": k, "ccr": c, "layers": [r.to_json() for r in self.at(k, c)]}
                for k in self.settings.ks for c in self.settings.ccrs]
        return {"n_tokens": self.n_tokens, "n_pairs": self.n_pairs, "n_null": self.settings.n_null,
                "seed": self.settings.seed, "identity": self.identity, "settings": self.settings.spec, "runs": runs}


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

    def at(self, k: int, ccr: int) -> list[LayerPGA]:
        """The per-layer results at one (k, CCR depth)."""
        return [x for x in self.layers if (x.k, x.ccr) == (k, ccr)]

    @classmethod
    def from_record(cls, record: dict, step: int | None = None) -> CheckpointResult:
        """From the JSON value ``measure_checkpoint`` stores; ``step`` fills in an unnumbered checkpoint."""
        return cls(record["step"] if record["step"] is not None else step, record["revision"] or "",
                   record["identity"], record["fingerprint"], [LayerPGA.from_record(x) for x in record["layers"]],
                   record["loss"], record["seconds"])

    def to_json(self) -> dict:
        return {"step": self.step, "revision": self.revision, "identity": self.identity,
                "fingerprint": self.fingerprint, "duplicate_of": self.duplicate_of, "loss": self.loss,
                "seconds": self.seconds, "layers": [{"k": x.k, "ccr": x.ccr, **x.to_json()} for x in self.layers]}


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


@dataclass(frozen=True)
class CheckpointSeries:
    """One model's checkpoints, all computed with the same text, sampling, dtype and settings
    (``spec``: the checkpoint record's spec without the model), ordered by step."""

    name: str
    spec: dict
    results: list[CheckpointResult]
    preview: bool = False  # PGA on the pairs inside blocks of tokens; the exact series replaces it

    @property
    def ks(self) -> list[int]:
        return self.spec["settings"]["ks"]

    @property
    def ccrs(self) -> list[int]:
        return self.spec["settings"]["ccrs"]

    @property
    def label(self) -> str:
        sampling, settings = self.spec["sampling"], self.spec["settings"]
        return (f"{self.name} · {len(self.results)} checkpoints · N {sampling['n_tokens']} · seed {sampling['seed']}"
                f" · k {self.ks} · CCR {self.ccrs} · R {settings['n_null']} · {self.spec['dtype']}"
                f" · text {self.spec['corpus']['sha256'][:8]}")

    @property
    def preview_work(self) -> str:
        """What a preview was computed on, in words."""
        settings = self.spec["settings"]
        return preview_words(settings, "pairs" if settings.get("pair_blocks") else "every pair")

    def describe(self, k: int, ccr: int) -> str:
        sampling, settings = self.spec["sampling"], self.spec["settings"]
        loss = f"loss on {self.spec['loss_windows']} held-out windows of the same text"
        preview = f"Preview on {self.preview_work} (the exact series follows, with the {loss}): " if self.preview \
            else ""
        return (f"{preview}N = {sampling['n_tokens']}, k = {k}, CCR-{ccr}, R = {settings['n_null']}, "
                f"seed {sampling['seed']}, {self.spec['dtype']}" + ("." if self.preview else f"; {loss}."))

    def choose(self, revisions: list[str]) -> CheckpointSeries:
        """The same series restricted to ``revisions`` (kept in step order)."""
        return replace(self, results=[r for r in self.results if (r.revision or str(r.step)) in revisions])

    def table(self, k: int, ccr: int) -> pd.DataFrame:
        return pd.DataFrame([{"step": r.step, "revision": r.revision, "identity": r.identity,
                              "duplicate_of": r.duplicate_of, "loss": r.loss, "layer": x.layer, "z": x.z,
                              "pc1_angle_deg": x.pc1_angle_deg} for r in self.results for x in r.at(k, ccr)])

    def heatmaps(self, k: int, ccr: int) -> go.Figure:
        title = "Preview: across training" if self.preview else "Across training"
        return figures.checkpoint_heatmaps(self.results, k, ccr, title)

    def to_json(self) -> dict:
        """The CLI's ``training-sweep`` contract."""
        return {"model": self.name, "settings": self.spec["settings"],
                "checkpoints": [r.to_json() for r in self.results]}


@dataclass(frozen=True)
class DepthCurves:
    """z curves of several models or checkpoints, to be compared against relative depth; ``preview``: some are
    previews, which exact curves replace."""

    curves: dict[str, list[LayerPGA]]
    preview: bool = False

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"series": name, "layer": x.layer, "relative_depth": x.layer / max(len(layers) - 1, 1),
                              "k": x.k, "ccr": x.ccr, "z": x.z} for name, layers in self.curves.items()
                             for x in layers])

    def figure(self) -> go.Figure:
        return figures.z_by_relative_depth(self.curves, self.preview)

    def pc1_figure(self) -> go.Figure:
        return figures.pc1_by_relative_depth(self.curves)

    def difference(self) -> pd.DataFrame | None:
        """z of the second curve minus the first, per layer, when exactly two share a layer grid; else None."""
        if len(self.curves) != 2:
            return None
        (_, first), (_, second) = self.curves.items()
        if [r.layer for r in first] != [r.layer for r in second]:
            return None
        return pd.DataFrame({"layer": [r.layer for r in first], "z_first": [r.z for r in first],
                             "z_second": [r.z for r in second],
                             "difference": [b.z - a.z for a, b in zip(first, second, strict=True)]})

    def difference_figure(self) -> go.Figure | None:
        table = self.difference()
        if table is None:
            return None
        return figures.z_difference(table.layer.tolist(), table.difference.tolist(), tuple(self.curves))


@dataclass(frozen=True)
class ConvergenceRun:
    """Two models' agreement on the same passages, per layer pair, with what it was computed on."""

    model_a: str
    model_b: str
    identities: tuple[str, str]
    units: int
    k: int
    n_null: int
    n_layers_a: int
    results: list[LayerConvergence]

    def describe(self) -> str:
        return (f"{self.model_a} against {self.model_b}: {self.units} passages, k = {self.k}, "
                f"{self.n_null} random subspaces.")

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"layer_a": r.layer_a, "layer_b": r.layer_b, "full": r.full, "readout": r.readout,
                              "null_mean": r.null_mean, "null_std": r.null_std} for r in self.results])

    def figure(self) -> go.Figure:
        return figures.convergence_figure(self.results, self.n_layers_a)

    def to_json(self) -> dict:
        return {"model_a": self.model_a, "model_b": self.model_b, "identities": list(self.identities),
                "units": self.units, "k": self.k, "n_null": self.n_null,
                "pairs": self.table().to_dict(orient="records")}


@dataclass(frozen=True)
class ProbeRun:
    """Probe accuracy per layer beside z at the settings ``pga`` was computed with; ``result`` None while the texts
    are pooled (the page draws z alone meanwhile)."""

    model: str
    identity: str
    data: str
    result: ProbeResult | None
    pga: PGARun | None = None
    of_texts: int | None = None  # a preview: the probes saw a seeded subset of this many texts, or none of them yet

    @property
    def preview(self) -> bool:
        return self.of_texts is not None or bool(self.pga and self.pga.preview)

    def describe(self) -> str:
        if self.result is None:
            text = (f"{self.data}: probe accuracy follows, once the {self.of_texts} texts are pooled (mean over "
                    "their first 64 tokens), a random subset of them first")
        else:
            seen = self.result.n_train + self.result.n_test
            text = (f"{self.data}: {len(self.result.classes)} classes, {self.result.n_train} training and "
                    f"{self.result.n_test} held-out texts (mean-pooled, first 64 tokens); logistic regression on "
                    "standardised features")
            if self.of_texts is not None:
                text = f"Preview on {seen} random texts of {self.of_texts} (all of them follow). " + text
        return text + (f"; z at {self.pga.describe()}." if self.pga else ".")

    def z(self) -> list[float] | None:
        return [r.z for r in self.pga.at()] if self.pga else None

    def table(self) -> pd.DataFrame:
        z = self.z()
        table = pd.DataFrame({"layer": range(len(z) if self.result is None else len(self.result.accuracy))})
        if self.result is not None:
            table["accuracy"] = self.result.accuracy
        if z is not None:
            table["z"] = z
        return table

    def figure(self) -> go.Figure:
        if self.result is None:
            return figures.probe_figure(None, None, self.z(), "Preview: z by layer (probe accuracy follows)")
        title = "Probe accuracy and z by layer" if self.pga else "Probe accuracy by layer (z follows)"
        return figures.probe_figure(self.result.accuracy, self.result.baseline, self.z(),
                                    f"Preview: {title}" if self.preview else title)

    def to_json(self) -> dict:
        return {"model": self.model, "identity": self.identity, "data": self.data, "classes": self.result.classes,
                "n_train": self.result.n_train, "n_test": self.result.n_test, "baseline": self.result.baseline,
                "accuracy": self.result.accuracy.tolist()}


COLOURINGS = ("projection on PC1", "share inside V_k", "token class")


@dataclass(frozen=True)
class TokenMapRun:
    """A UMAP of one layer after CCR, with the tokens it shows; while ``preview``, the corrected states'
    top two principal components instead (the UMAP replaces it)."""

    coords: np.ndarray
    pc1: np.ndarray
    share_in_readout: np.ndarray
    tokens: list[str]
    contexts: list[str]
    token_classes: list[str]
    layer: int
    ccr: int
    k: int
    seed: int
    preview: bool = False

    def describe(self) -> str:
        method = ("Preview: the top two principal components after CCR (the UMAP follows)" if self.preview
                  else f"UMAP seed {self.seed} (15 neighbours)")
        return f"Layer {self.layer}, CCR-{self.ccr}, k = {self.k}, N = {len(self.tokens)}. {method}."

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({"x": self.coords[:, 0], "y": self.coords[:, 1], "token": self.tokens,
                             "pc1": self.pc1, "share_in_readout": self.share_in_readout, "class": self.token_classes})

    def figure(self, colour_by: str = COLOURINGS[0]) -> go.Figure:
        colour = {COLOURINGS[0]: self.pc1, COLOURINGS[1]: self.share_in_readout,
                  COLOURINGS[2]: np.array(self.token_classes)}[colour_by]
        hover = [f"<b>{figures.plain(repr(t))}</b><br>...{figures.plain(c)}"
                 for t, c in zip(self.tokens, self.contexts, strict=True)]
        return figures.token_map_figure(self.coords, colour, hover, colour_by, self.preview)


def spectrum_table(basis: ReadoutBasis) -> pd.DataFrame:
    """Singular values of W_U by rank."""
    return pd.DataFrame({"rank": range(1, basis.d + 1), "singular_value": basis.singular_values})


def sensitivity_table(report: CapacityReport) -> pd.DataFrame:
    """Capacity under each formula at eps - delta, eps and eps + delta."""
    return pd.DataFrame([{"formula": figures.FORMULA_LABELS[name],
                          f"eps - {report.delta}": f"{report.at_minus[name]:.3g}",
                          f"eps = {report.eps:.4f}": f"{report.capacity[name]:.3g}",
                          f"eps + {report.delta}": f"{report.at_plus[name]:.3g}"} for name in FORMULAS])


def atlas_table(measured: list | None = None) -> pd.DataFrame:
    """The published models as shipped (``analysis.capacity.atlas``), the capacity the project's formulas give at
    their (d_model, epsilon), and the epsilon measured here where a model was measured."""
    here = {m.published.hub_id: m.epsilon for m in measured or []}
    return pd.DataFrame([{"name": m.name, "hub_id": m.hub_id, "d_model": m.d_model, "epsilon": m.epsilon,
                          "class": m.model_class, "capacity_full": None if m.model_class == "Class 1"
                          else m.capacity.capacity["full"], "epsilon_measured_here": here.get(m.hub_id)}
                         for m in atlas.published_models()])


def capacity_curves_table(d: int, eps: float) -> pd.DataFrame:
    """The capacity-against-epsilon curves ``figures.capacity_figure`` draws."""
    return pd.DataFrame(capacity_curves(d, figures.capacity_grid(eps)))


def epsilon_curves_table(k: float) -> pd.DataFrame:
    """The epsilon-against-d curves ``figures.epsilon_by_dimension`` draws."""
    return pd.DataFrame(epsilon_curves(k))


def packing_table(cells: list[PackingCell]) -> pd.DataFrame:
    return pd.DataFrame([cell.to_json() for cell in cells])


def fits_table(fits: dict) -> pd.DataFrame:
    """One row per fitted form: its constants, R^2, MAPE and NRMSE (``analysis.capacity.packing.fit_formulas``)."""
    return pd.DataFrame(fits).T


def histogram_table(histogram: Histogram) -> pd.DataFrame:
    return pd.DataFrame({"left": histogram.edges[:-1], "right": histogram.edges[1:], "count": histogram.counts,
                         "share": histogram.shares})


@dataclass(frozen=True)
class CapacityRun:
    """A model's W_E (or W_U) cosine statistics and histogram, and the capacity at its epsilon."""

    model: str
    identity: str
    geometry: MatrixGeometry
    report: CapacityReport
    preview: bool = False  # the histogram counts every pair among a few thousand random rows, not all pairs

    def table(self) -> pd.DataFrame:
        return histogram_table(self.geometry.histogram)

    def histogram_figure(self, title: str) -> go.Figure:
        return figures.cosine_histogram_figure(self.geometry.histogram, self.geometry.stats, title)

    def capacity_figure(self) -> go.Figure:
        return figures.capacity_figure(self.report.d, self.report.eps, self.report.status == "indeterminate")

    def counted(self) -> str:
        """What the histogram counts: all pairs or a sample, of how many rows."""
        stats, histogram = self.geometry.stats, self.geometry.histogram
        if self.preview:
            rows = round((1 + math.sqrt(1 + 8 * histogram.sampled)) / 2)
            return (f"preview: all {histogram.sampled:,} pairs among {rows:,} random rows of {stats.n_rows:,} (the "
                    f"histogram of all {stats.n_pairs:,} pairs follows)")
        pairs = f"{histogram.sampled:,} sampled pairs" if histogram.sampled else f"all {stats.n_pairs:,} pairs"
        return f"{pairs} of {stats.n_rows:,} rows"

    @property
    def placement(self) -> str:
        """Where the model sits among the published ones, in one line (``analysis.capacity.atlas``)."""
        return atlas.placement(self.geometry.stats.d, self.geometry.stats.epsilon)

    def atlas_figure(self, measured: list | None = None) -> go.Figure:
        """This model (a star) among the 45 published ones, with any published model ``measured`` here."""
        stats = self.geometry.stats
        return figures.atlas_figure(atlas.published_models(), {self.model: (stats.d, stats.epsilon)}, measured)

    def to_json(self) -> dict:
        stats, histogram = self.geometry.stats, self.geometry.histogram
        return {**self.report.to_json(), "model": self.model, "identity": self.identity,
                "matrix": self.geometry.which, "tensor": self.geometry.tensor_name, "mu": stats.mu,
                "sigma": stats.sigma, "epsilon": stats.epsilon, "n_rows": stats.n_rows,
                "n_zero_rows": stats.n_zero_rows, "d_model": stats.d, "tied_embeddings": self.geometry.tied_embeddings,
                "histogram": {"edges": histogram.edges.tolist(), "counts": histogram.counts.tolist(),
                              "sampled_pairs": histogram.sampled}}


@dataclass(frozen=True)
class TriageRun:
    """The triage verdict and everything behind it."""

    card: dict
    pga: PGARun
    deeper: PGARun | None
    stats: CosineStats  # of the embedding
    verdict: Verdict

    def table(self) -> pd.DataFrame:
        return self.pga.table()

    def z_figure(self) -> go.Figure:
        return self.pga.z_figure(title="Readout alignment z by layer")
