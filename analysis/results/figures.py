"""Plotly figures from result objects. No computation beyond arranging numbers; no streamlit."""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from analysis.capacity.epsilon import CosineStats, Histogram
from analysis.capacity.formulas import (
    CLASS1_ABOVE,
    CLASS2_BELOW,
    FITTED_K,
    FORMULAS,
    FULL,
    capacity,
    capacity_curves,
    epsilon_curves,
)
from analysis.geometry.pga import LayerPGA, LayerShape

FORMULA_LABELS = {"full": "fully parameterised", "adjusted": "adjusted (C = 1.2934)",
                  "jl_fitted": "JL fitted (C = 3.0295)", "jl_proven": "JL proven (C = 8)"}
# Every figure's template, as plotly's default: applied when a figure is serialised, where naming it in each layout
# validated a copy of it per figure (~20 ms each, six figures in a page run of Readout alignment).
TEMPLATE = "plotly_white"
pio.templates.default = TEMPLATE
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f")
# The toolbar wherever a chart is drawn (the app, a chart's HTML download, the report): plotly.js offers by default to
# upload the chart to Plotly's cloud ("Share chart..."); nothing here leaves the machine.
CONFIG = dict(displaylogo=False, showSendToCloud=False)
# The reference marks' colour (zero lines, thresholds, outlines): a grey that reads on a light page and on a dark one,
# where black (or plotly's default #444 for a shape) disappears on a dark theme.
INK = "#7f7f7f"
# "This model" among the formulas' curves and the published models: a colour none of them takes.
THIS_MODEL = dict(symbol="star", color="#ff7f0e", line=dict(color=INK, width=1))


def colours(n: int) -> list[str]:
    """``n`` colours, cycling the palette: every series is drawn, however many there are."""
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


def plain(text: str) -> str:
    """``text`` as plotly shows it literally: plotly renders a subset of HTML (links, styles) in titles, trace
    names, tick labels and hover text, so every string that may come from a user (a model's name, a
    revision, a text) is escaped."""
    return html.escape(str(text), quote=False)


def log_axis(values, **axis) -> dict:
    """A log axis labelled at powers of ten only (no "2 5" minor labels), at most about eight labels: its
    ``dtick`` in decades from the finite positive ``values`` it shows, ``axis`` merged in."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    decades = float(np.log10(finite.max() / finite.min())) if len(finite) else 1.0
    step = next(n for n in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500) if n >= decades / 8)
    return dict(type="log", dtick=step, exponentformat="power", **axis)


def round_step(span: float, ticks: int = 5) -> float:
    """A step of 1, 2 or 5 times a power of ten giving about ``ticks`` ticks over ``span``."""
    raw = max(span, 1e-12) / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


LAYOUT = dict(margin=dict(l=60, r=20, t=72, b=50), legend=dict(orientation="h", y=-0.2))  # every figure's


def _title(title: str) -> dict:
    """The title as plain text (:func:`plain`), in its own band under plotly's toolbar (which takes the top right),
    never beside it."""
    return dict(text=plain(title), x=0, xanchor="left", xref="paper", y=1, yref="container", yanchor="top",
                pad=dict(t=34), font=dict(weight="bold"))


def _plain_names(traces) -> None:
    """Every trace's name shown as plain text (:func:`plain`), in place."""
    for trace in traces:
        if trace.name:
            trace.name = plain(trace.name)


def _layout(fig: go.Figure, title: str, height: int = 380) -> go.Figure:
    """The common layout of a grid of panels made by ``make_subplots``; the title and every trace name shown as plain
    text."""
    _plain_names(fig.data)
    fig.update_layout(title=_title(title), height=height, **LAYOUT)
    return fig


def _figure(traces: list, title: str, height: int = 380, **layout) -> go.Figure:
    """A figure made in one call: ``traces`` (their names shown as plain text), the common layout and ``layout``
    (axes, shapes, annotations as dicts). Plotly's step-by-step helpers (``add_hline``, ``update_xaxes``,
    ``make_subplots``) each validated the layout again: the six figures Readout alignment redraws at every move took
    49 ms to make on a laptop-class core, 10 ms so (the same figures, to the byte)."""
    _plain_names(traces)
    return go.Figure(traces, dict(title=_title(title), height=height, **LAYOUT, **layout))


def _line_across(y: float, **line) -> dict:
    """A horizontal line at ``y`` across the plot (as ``add_hline`` draws it)."""
    return dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=y, y1=y, line=line)


def _band_across(y0: float, y1: float, **fill) -> dict:
    """A band from ``y0`` to ``y1`` across the plot, without an outline (as ``add_hrect`` draws it)."""
    return dict(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=y0, y1=y1, line=dict(width=0), **fill)


def _band_up(x0: float, x1: float, **fill) -> dict:
    """A band from ``x0`` to ``x1`` up the plot, without an outline (as ``add_vrect`` draws it)."""
    return dict(type="rect", xref="x", x0=x0, x1=x1, yref="y domain", y0=0, y1=1, line=dict(width=0), **fill)


def _line_up(x: float, **line) -> dict:
    """A vertical line at ``x`` up the plot (as ``add_vline`` draws it)."""
    return dict(type="line", xref="x", x0=x, x1=x, yref="y domain", y0=0, y1=1, line=line)


def _note(text: str, x: float, y: float, xanchor: str, yanchor: str, **refs) -> dict:
    """A label without an arrow at (``x``, ``y``), in the coordinates ``refs`` names (``xref``, ``yref``; by default
    the axes')."""
    return dict(text=text, x=x, y=y, xanchor=xanchor, yanchor=yanchor, showarrow=False, **refs)


def _dark_direction() -> dict:
    """The dotted line at 90 degrees, labelled, as a figure's shapes and annotations."""
    return dict(shapes=[_line_across(90, color=INK, dash="dot")],
                annotations=[_note("90 deg: dark direction", 1, 90, "right", "bottom", xref="x domain", yref="y")])


def z_by_layer(curves: dict[str, list[LayerPGA]], title: str = "Readout alignment z by layer",
               exact_layers: set[int] | None = None) -> go.Figure:
    """z against layer for each named curve, with the bootstrap interval and the null band |z| <= 2. A preview's
    (``exact_layers``: those of its layers that are exact) other layers are drawn with open markers."""
    traces, shapes = [], []
    for colour, (name, results) in zip(colours(len(curves)), curves.items(), strict=True):
        layers = [r.layer for r in results]
        symbols = None if exact_layers is None else ["circle" if layer in exact_layers else "circle-open"
                                                     for layer in layers]
        z = np.array([r.z for r in results])
        low = np.array([r.z_interval[0] for r in results])
        high = np.array([r.z_interval[1] for r in results])
        traces.append(go.Scatter(
            x=layers, y=z, name=name, mode="lines+markers", line=dict(color=colour), marker=dict(symbol=symbols),
            error_y=dict(type="data", symmetric=False, array=high - z, arrayminus=z - low, thickness=1),
            customdata=np.stack([[r.rho_readout for r in results], [r.p_value for r in results]], axis=1),
            hovertemplate="layer %{x}<br>z %{y:.2f}<br>rho %{customdata[0]:.4f}<br>p %{customdata[1]:.3f}",
        ))
    if any(curves.values()):  # the band, named in the legend after the curves: a label inside the plot crossed them
        shapes.append(_band_across(-2, 2, fillcolor="grey", opacity=0.15))
        traces.append(go.Scatter(x=[None], y=[None], mode="markers", name="null mean +- 2 sd", hoverinfo="skip",
                                 marker=dict(symbol="square", size=12, color="rgba(128, 128, 128, 0.3)")))
    shapes.append(_line_across(0, color=INK, width=1))
    return _figure(traces, title, shapes=shapes, xaxis=dict(title="layer (0 = embeddings)"),
                   yaxis=dict(title="z (readout vs random subspaces)"))


def null_distribution(result: LayerPGA) -> go.Figure:
    """The layer's null rho values as a histogram, with a line at rho_readout."""
    rho = result.rho_readout
    return _figure([go.Histogram(x=result.null, nbinsx=30, name="random subspaces", marker_color="#999")],
                   f"Layer {result.layer}: readout vs {len(result.null)} random subspaces",
                   shapes=[_line_up(rho, color="#d62728", width=3)],
                   annotations=[_note(f"readout rho = {rho:.4f}", rho, 1, "center", "bottom", xref="x",
                                      yref="y domain")],
                   xaxis=dict(title="Spearman rho (full vs projected distances)"), yaxis=dict(title="count"))


def pc_angle_by_layer(results: list[LayerPGA | LayerShape]) -> go.Figure:
    """PC1 angle to V_k against layer."""
    return _figure([go.Scatter(x=[r.layer for r in results], y=[r.pc1_angle_deg for r in results],
                               mode="lines+markers", name="PC1")], "PC1 angle to V_k", **_dark_direction(),
                   yaxis=dict(title="angle to V_k (degrees)", range=[0, 92]), xaxis=dict(title="layer"))


def pc_angle_heatmap(results: list[LayerPGA | LayerShape]) -> go.Figure:
    """Angles of PC1..PCn to V_k: layers x components."""
    angles = np.array([r.pc_angles_deg for r in results])
    return _figure([go.Heatmap(z=angles.T, x=[r.layer for r in results],
                               y=[f"PC{i + 1}" for i in range(angles.shape[1])], colorscale="Viridis",
                               zmin=0, zmax=90, colorbar=dict(title="deg"))],
                   "PC1..PC10 angles to V_k", height=340, xaxis=dict(title="layer"))


SPECTRAL = (("z", "z"), ("rankme", "RankMe"), ("alpha_req", "alpha-ReQ"), ("isotropy", "IsoScore"),
            ("condition_number", "condition number"))


def spectral_small_multiples(results: list[LayerPGA], shaped: list[LayerPGA | LayerShape] | None = None) -> go.Figure:
    """z beside RankMe, alpha-ReQ, IsoScore and the condition number, one panel each, against layer (the panels
    placed as ``make_subplots(rows=1, cols=5)`` places them). ``shaped``: the spectral metrics at more layers than
    ``results`` has z at (``PGARun.shaped``: a preview at some layers)."""
    shaped = results if shaped is None else shaped
    panels, gap = len(SPECTRAL), 0.2 / len(SPECTRAL)
    width = (1 - gap * (panels - 1)) / panels
    traces, axes, titles = [], {}, []
    for number, (field, label) in enumerate(SPECTRAL, start=1):
        suffix, left = "" if number == 1 else str(number), (number - 1) * (width + gap)
        drawn = results if field == "z" else shaped
        traces.append(go.Scatter(x=[r.layer for r in drawn], y=[getattr(r, field) for r in drawn],
                                 mode="lines+markers", name=label, showlegend=False, xaxis=f"x{suffix}",
                                 yaxis=f"y{suffix}"))
        axes[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", domain=[left, left + width])
        axes[f"yaxis{suffix}"] = dict(anchor=f"x{suffix}", domain=[0.0, 1.0])
        titles.append(_note(label, left + width / 2, 1.0, "center", "bottom", xref="paper", yref="paper",
                            font=dict(size=16)))
    axes[f"yaxis{panels}"] |= log_axis([r.condition_number for r in shaped])
    return _figure(traces, "Spectral metrics beside z", height=300, annotations=titles, **axes)


def cosine_histogram_figure(histogram: Histogram, stats: CosineStats, title: str) -> go.Figure:
    """Share of pairs per cosine bin, with lines at mu and at epsilon = mu + 2 sigma."""
    centres = (histogram.edges[:-1] + histogram.edges[1:]) / 2
    tallest = float(np.max(histogram.shares, initial=0.0)) or 1.0
    near_edge = stats.epsilon > 0.55  # epsilon's label goes left of its line, to stay inside
    # mu's line stops under its label; epsilon's label sits higher, so neither line crosses the other's text
    return _figure([go.Bar(x=centres, y=histogram.shares, width=histogram.edges[1] - histogram.edges[0],
                           marker_color="#1f77b4", name="pairs")], title,
                   shapes=[dict(type="line", x0=stats.mu, x1=stats.mu, y0=0, y1=1.1 * tallest,
                                line=dict(color=INK, dash="dot")),
                           _line_up(stats.epsilon, color="#d62728", width=3)],
                   annotations=[_note(f"mu = {stats.mu:.3f}", stats.mu, 1.1 * tallest, "right", "bottom"),
                                _note(f"epsilon = mu + 2 sigma = {stats.epsilon:.3f}", stats.epsilon, 1.2 * tallest,
                                      "right" if near_edge else "left", "bottom")],
                   xaxis=dict(title="cosine similarity", range=[-1, 1]),
                   yaxis=dict(title="share of pairs", range=[0, 1.3 * tallest]))  # headroom: labels above the bars


def paired_cosine_figure(histogram: Histogram) -> go.Figure:
    """Histogram of cos(E_i, U_i) across tokens."""
    centres = (histogram.edges[:-1] + histogram.edges[1:]) / 2
    return _figure([go.Bar(x=centres, y=histogram.shares, width=histogram.edges[1] - histogram.edges[0],
                           marker_color="#2ca02c")], "cos(E_i, U_i): each token's two rows",
                   xaxis=dict(title="cos(E_i, U_i)", range=[-1, 1]), yaxis=dict(title="share of tokens"))


def capacity_grid(eps: float) -> np.ndarray:
    """The epsilon values the capacity curves are drawn at: up to past the model's epsilon."""
    return np.linspace(0.01, min(1.0, max(0.3, 1.15 * eps)), 300)


def capacity_figure(d: int, eps: float, indeterminate: bool = False) -> go.Figure:
    """Capacity against epsilon at this d under each formula (log y), the model's point, the class
    zones, and the epsilon range where the full form leaves its fitted k range shaded. An ``indeterminate``
    model (Class 1) gets a line at its epsilon and no point: the formulas give no capacity there."""
    curves = capacity_curves(d, capacity_grid(eps))
    grid = curves["eps"]
    outside = (curves["full"] < FITTED_K[0]) | (curves["full"] > FITTED_K[1])
    shapes = [_band_up(grid[start], grid[stop], fillcolor="orange", opacity=0.12) for start, stop in _runs(outside)]
    shapes.append(_band_up(CLASS2_BELOW, CLASS1_ABOVE, fillcolor="grey", opacity=0.1))
    notes = [_note("between classes", (CLASS2_BELOW + CLASS1_ABOVE) / 2, 1, "center", "top", xref="x",
                   yref="y domain")]
    traces = [go.Scatter(x=grid, y=curves[name], mode="lines", name=FORMULA_LABELS[name], line=dict(color=colour))
              for colour, name in zip(colours(len(FORMULAS)), FORMULAS, strict=True)]
    if indeterminate:
        shapes.append(_line_up(eps, color=INK, dash="dash"))
        notes.append(_note("this model: Class 1, indeterminate", eps, 1, "right" if eps > 0.5 * grid[-1] else "left",
                           "top", xref="x", yref="y domain"))
    else:
        points = [min(capacity(eps, d, name), 1e300) for name in FORMULAS]
        traces.append(go.Scatter(x=[eps] * len(FORMULAS), y=points, mode="markers", name="this model",
                                 marker=dict(size=14, **THIS_MODEL)))
    shown = np.concatenate([np.asarray(curves[name], dtype=float) for name in FORMULAS])
    return _figure(traces, f"Capacity against epsilon at d = {d}", height=420, shapes=shapes, annotations=notes,
                   yaxis=log_axis(np.minimum(shown, 1e300), title="capacity k (directions)"),
                   xaxis=dict(title="epsilon", range=[grid[0], grid[-1]]))


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True in ``mask``."""
    runs, start = [], None
    for index, flag in enumerate(mask):
        if flag and start is None:
            start = index
        if not flag and start is not None:
            runs.append((start, index - 1))
            start = None
    if start is not None:
        runs.append((start, len(mask) - 1))
    return runs


def packing_figure(cells: list, fits: dict | None = None) -> go.Figure:
    """eps* of simulated cells against k for each d, with the fitted full-form curves."""
    traces, widths = [], sorted({c.d for c in cells})
    for colour, d in zip(colours(len(widths)), widths, strict=True):
        mine = sorted((c for c in cells if c.d == d), key=lambda c: c.k)
        traces.append(go.Scatter(x=[c.k for c in mine], y=[c.eps_star for c in mine], mode="markers",
                                 name=f"d = {d} ({mine[0].method})", marker=dict(color=colour, size=10)))
        ks = np.geomspace(max(min(c.k for c in mine) / 2, d + 1), max(c.k for c in mine) * 2, 60)
        fitted = (fits or {}).get("full", {})
        constants = fitted if "C" in fitted else FULL
        eps = np.sqrt(constants["C"] * np.maximum(constants["a"] * np.log(ks) - np.log(d), 0) ** constants["b"]
                      / d ** constants["c"])
        traces.append(go.Scatter(x=ks, y=eps, mode="lines", line=dict(color=colour, dash="dot"),
                                 name=f"full form, d = {d}" + (" (fitted)" if "C" in fitted else " (paper)")))
    return _figure(traces, "Packing simulations and the full form",
                   xaxis=log_axis([c.k for c in cells] + [d + 1 for d in widths], title="k (vectors)"),
                   yaxis=dict(title="eps* (max |cos|)"))


def readout_spectrum(singular_values: np.ndarray, k: int) -> go.Figure:
    """Singular values of W_U by rank (log y), with the readout cut at k."""
    ranks = np.arange(1, len(singular_values) + 1)
    return _figure([go.Scatter(x=ranks, y=singular_values, mode="lines", name="singular value")],
                   "Unembedding spectrum", height=300, shapes=[_line_up(k, color="#d62728")],
                   annotations=[_note(f"k = {k}", k, 1, "left", "top", xref="x", yref="y domain")],
                   yaxis=log_axis(singular_values, title="singular value of W_U"), xaxis=dict(title="rank"))


def epsilon_by_dimension(k: float, d: int, eps: float) -> go.Figure:
    """epsilon needed to hold k directions against d under each formula, with the model's point."""
    curves = epsilon_curves(k)
    traces = [go.Scatter(x=curves["d"], y=curves[name], mode="lines", name=FORMULA_LABELS[name],
                         line=dict(color=colour))
              for colour, name in zip(colours(len(FORMULAS)), FORMULAS, strict=True)]
    traces.append(go.Scatter(x=[d], y=[eps], mode="markers", name="this model",
                             marker=dict(size=14, **THIS_MODEL)))
    return _figure(traces, f"epsilon for k = {k:,.0f} against d", xaxis=log_axis(curves["d"], title="d (dimensions)"),
                   yaxis=dict(title="epsilon"))


def checkpoint_heatmaps(series: list, k: int, ccr: int, title: str = "Across training") -> go.Figure:
    """z (diverging, centred on 0) and the PC1 angle as layer x checkpoint heatmaps, loss beneath.

    ``series`` is a list of ``analysis.results.collections.CheckpointResult``; duplicated weights are marked with *.
    """
    labels = [plain(f"{r.step}" + (f" * (= {r.duplicate_of})" if r.duplicate_of else "")) for r in series]

    def grid(field: str) -> np.ndarray:
        return np.array([[getattr(x, field) for x in r.layers if (x.k, x.ccr) == (k, ccr)] for r in series]).T

    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, row_heights=[0.4, 0.4, 0.2], vertical_spacing=0.06,
                        subplot_titles=[f"z (k = {k}, CCR-{ccr})", "PC1 angle to V_k (degrees)",
                                        "held-out loss (nats/token)"])
    z = grid("z")
    limit = float(np.nanmax(np.abs(z))) if z.size else 1.0
    fig.add_trace(go.Heatmap(z=z, x=labels, colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit,
                             colorbar=dict(title="z", y=0.8, len=0.4)), row=1, col=1)
    fig.add_trace(go.Heatmap(z=grid("pc1_angle_deg"), x=labels, colorscale="Viridis", zmin=0, zmax=90,
                             colorbar=dict(title="deg", y=0.35, len=0.4)), row=2, col=1)
    fig.add_trace(go.Scatter(x=labels, y=[r.loss for r in series], mode="lines+markers", name="loss"),
                  row=3, col=1)
    fig.update_yaxes(title="layer", row=1, col=1)
    fig.update_yaxes(title="layer", row=2, col=1)
    fig.update_xaxes(title="checkpoint step (* = weights identical to an earlier checkpoint)", type="category",
                     row=3, col=1)
    return _layout(fig, title, height=760)


def z_by_relative_depth(curves: dict[str, list[LayerPGA]], preview: bool = False) -> go.Figure:
    """z curves of several models (or checkpoints) against relative depth (layer / last layer); titled a preview
    when ``preview``."""
    traces = []
    for colour, (name, results) in zip(colours(len(curves)), curves.items(), strict=True):
        last = max(max(r.layer for r in results), 1)
        traces.append(go.Scatter(x=[r.layer / last for r in results], y=[r.z for r in results], mode="lines+markers",
                                 name=name, line=dict(color=colour)))
    return _figure(traces, "Preview: z against relative depth" if preview else "z against relative depth",
                   shapes=[_band_across(-2, 2, fillcolor="grey", opacity=0.15)],
                   xaxis=dict(title="relative depth (layer / last layer)"), yaxis=dict(title="z"))


def pc1_by_relative_depth(curves: dict[str, list[LayerPGA]]) -> go.Figure:
    """The PC1 angle to V_k of several models (or checkpoints) against relative depth."""
    traces = []
    for colour, (name, results) in zip(colours(len(curves)), curves.items(), strict=True):
        last = max(max(r.layer for r in results), 1)
        traces.append(go.Scatter(x=[r.layer / last for r in results], y=[r.pc1_angle_deg for r in results],
                                 mode="lines+markers", name=name, line=dict(color=colour)))
    return _figure(traces, "PC1 angle against relative depth", **_dark_direction(),
                   yaxis=dict(title="PC1 angle to V_k (degrees)", range=[0, 92]),
                   xaxis=dict(title="relative depth (layer / last layer)"))


def z_difference(layers: list[int], difference: list[float], names: tuple[str, str]) -> go.Figure:
    """z of the second model minus z of the first, layer by layer (same layer grid)."""
    return _figure([go.Bar(x=layers, y=difference, marker_color=["#2ca02c" if v >= 0 else "#d62728"
                                                                 for v in difference])],
                   "z of B minus z of A, by layer", height=320, shapes=[_line_across(0, color=INK, width=1)],
                   xaxis=dict(title="layer"), yaxis=dict(title="z difference"))


def convergence_figure(results: list, n_a: int) -> go.Figure:
    """Spearman rho of two models' unit distances: full space, readout subspaces, random-subspace band."""
    depth = [r.layer_a / max(n_a - 1, 1) for r in results]
    mean = np.array([r.null_mean for r in results])
    spread = 2 * np.array([r.null_std for r in results])
    return _figure([go.Scatter(x=depth + depth[::-1], y=list(mean + spread) + list((mean - spread)[::-1]),
                               fill="toself", fillcolor="rgba(128,128,128,0.2)", line=dict(width=0),
                               name="random subspaces (mean +- 2 sd)"),
                    go.Scatter(x=depth, y=[r.full for r in results], mode="lines+markers", name="full spaces"),
                    go.Scatter(x=depth, y=[r.readout for r in results], mode="lines+markers",
                               name="readout subspaces")], "Cross-model convergence",
                   xaxis=dict(title="relative depth of model A (B at the matched depth)"),
                   yaxis=dict(title="Spearman rho of unit distances"))


def probe_figure(accuracy: np.ndarray | None, baseline: float | None, z: list[float] | None = None,
                 title: str = "Probe accuracy and z by layer") -> go.Figure:
    """Probe accuracy per layer with the majority baseline (None: not yet, its axis drawn empty), and z on a second
    axis."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    if accuracy is not None:
        fig.add_trace(go.Scatter(x=list(range(len(accuracy))), y=accuracy, mode="lines+markers",
                                 name="probe accuracy (held out)"))
        fig.add_hline(y=baseline, line_dash="dot", line_color=INK, annotation_text=f"majority baseline {baseline:.2f}")
    else:  # an empty trace: plotly draws no axis that no trace is on
        fig.add_trace(go.Scatter(x=[], y=[], showlegend=False))
    if z is not None:
        fig.add_trace(go.Scatter(x=list(range(len(z))), y=z, mode="lines", name="z (readout alignment)",
                                 line=dict(color="#d62728", dash="dash")), secondary_y=True)
    fig.update_yaxes(title="accuracy", range=[0, 1.02], secondary_y=False)
    if z is not None:
        finite = [v for v in z if math.isfinite(v)] or [0.0]
        fig.update_yaxes(title="z", secondary_y=True, showgrid=False, tick0=0,
                         dtick=round_step(max(finite) - min(finite)))
    fig.update_xaxes(title="layer")
    return _layout(fig, title)


def token_map_figure(coords: np.ndarray, colour: np.ndarray, hover: list[str], colour_name: str,
                     preview: bool = False) -> go.Figure:
    """The UMAP scatter (``preview``: the top-two-PC plane), coloured by a per-token value (or class), hover
    showing token and context."""
    if colour.dtype.kind in "fi":
        traces = [go.Scattergl(x=coords[:, 0], y=coords[:, 1], mode="markers", text=hover,
                               hovertemplate="%{text}<extra></extra>",
                               marker=dict(color=colour, colorscale="Viridis", size=6,
                                           colorbar=dict(title=colour_name)))]
    else:
        traces = [go.Scattergl(x=coords[chosen, 0], y=coords[chosen, 1], mode="markers", name=name,
                               text=[h for h, c in zip(hover, chosen, strict=True) if c],
                               hovertemplate="%{text}<extra></extra>", marker=dict(size=6))
                  for name, chosen in ((name, colour == name) for name in sorted(set(colour.tolist())))]
    return _figure(traces, "Preview: top two PCs (UMAP follows)" if preview else "Token map (UMAP)", height=560,
                   xaxis=dict(showticklabels=False), yaxis=dict(showticklabels=False))


CLASS_COLOURS = {"Class 1": "#d62728", "Class 2": "#1f77b4"}


def atlas_figure(published: list, highlighted: dict[str, tuple[int, float]],
                 measured: list | None = None) -> go.Figure:
    """epsilon against d_model (log) for the published models (``analysis.capacity.atlas``), coloured by class,
    with the class thresholds; each ``highlighted`` model (label -> (d_model, epsilon)) as a star; each
    ``measured`` published model (``Measured``) as an open diamond joined to its published point."""
    shapes = [_band_across(CLASS2_BELOW, CLASS1_ABOVE, fillcolor="grey", opacity=0.12),
              *(_line_across(level, color=INK, dash="dot") for level in (CLASS2_BELOW, CLASS1_ABOVE))]
    notes = [_note("between classes", 0, CLASS1_ABOVE, "left", "top", xref="x domain", yref="y"),
             _note(f"Class 2 below {CLASS2_BELOW:g}", 0, CLASS2_BELOW, "left", "top", xref="x domain", yref="y"),
             _note(f"Class 1 above {CLASS1_ABOVE:g}", 1, CLASS1_ABOVE, "right", "bottom", xref="x domain", yref="y")]
    traces = []
    hover = "<b>%{customdata[0]}</b><br>%{customdata[1]}<br>d_model %{x:,}<br>epsilon %{y:.5f}<br>%{customdata[2]}"
    for model_class, colour in CLASS_COLOURS.items():
        rows = [m for m in published if m.model_class == model_class]
        capacities = ["capacity indeterminate (Class 1)" if m.model_class == "Class 1"
                      else f"capacity (full form) {m.capacity.capacity['full']:.3g}" for m in rows]
        traces.append(go.Scatter(
            x=[m.d_model for m in rows], y=[m.epsilon for m in rows], mode="markers",
            name=f"{model_class}, published ({len(rows)})", marker=dict(color=colour, size=9, opacity=0.75),
            customdata=[[plain(m.name), plain(m.hub_id), c] for m, c in zip(rows, capacities, strict=True)],
            hovertemplate=hover + "<extra>published</extra>"))
    for m in measured or []:
        traces.append(go.Scatter(
            x=[m.published.d_model] * 2, y=[m.published.epsilon, m.epsilon], mode="lines+markers",
            name=f"{m.published.name}, measured here", line=dict(color="#2ca02c", dash="dot"),
            marker=dict(symbol=["circle", "diamond-open"], size=[1, 14], color="#2ca02c", line=dict(width=2)),
            hovertemplate=f"{plain(m.published.name)}<br>measured %{{y:.5f}} (published {m.published.epsilon_printed}, "
                          f"difference {m.difference:+.5f})<extra></extra>"))
    stars = ["#ff7f0e"] if len(highlighted) == 1 else ["#ff7f0e", "#9467bd", "#2ca02c", "#8c564b"]
    for colour, (label, (d, eps)) in zip(stars, highlighted.items(), strict=False):
        traces.append(go.Scatter(x=[d], y=[eps], mode="markers", name=label,
                                 marker=dict(symbol="star", size=20, color=colour, line=dict(color=INK, width=1)),
                                 hovertemplate=f"<b>{plain(label)}</b><br>d_model %{{x:,}}<br>epsilon %{{y:.4f}}"
                                               "<extra></extra>"))
    return _figure(traces, "45 published models: epsilon against d", height=440, shapes=shapes, annotations=notes,
                   xaxis=dict(type="log", title="d_model", dtick=math.log10(2), tickformat=",d"),
                   yaxis=dict(title="epsilon = mu + 2 sigma", range=[0, 1.05]))
