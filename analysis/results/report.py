"""A model's triage report as one self-contained HTML file: plotly's JavaScript inline (it opens
offline and can be mailed), the model card with the exact weights identity, the verdict, z by layer
at CCR 1, 5 and 10 with the null band, the PC1 angle, the spectral metrics, the embedding's cosine
histogram with mu and epsilon, the class and capacities, and the provenance of every number.

The file depends only on the results and the settings: no time of writing, fixed element ids, so
the CLI and the dashboard write the same bytes for the same view.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from analysis.capacity.atlas import SOURCE
from analysis.capacity.formulas import CLASS_NOTES, FORMULAS
from analysis.results.collections import CapacityRun, PGARun, TriageRun
from analysis.results.figures import CONFIG, FORMULA_LABELS, TEMPLATE
from analysis.results.glossary import explain, glossary

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
code { background: #f4f4f4; padding: 0 0.3rem; }
table { border-collapse: collapse; margin: 0.5rem 0; } td, th { padding: 0.25rem 0.8rem; text-align: left; }
tr:nth-child(even) { background: #f8f8f8; }
.cards { display: flex; flex-wrap: wrap; gap: 1rem; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.6rem 1rem; min-width: 9rem; }
.card b { display: block; font-size: 1.5rem; } .note { color: #555; }
"""


@dataclass(frozen=True)
class ModelReport:
    """Everything a triage report shows; ``html()`` renders it."""

    triage: TriageRun
    depth: PGARun  # every layer at CCR 1, 5 and 10, the default k
    capacity: CapacityRun
    corpus_name: str
    corpus_sha256: str
    libraries: dict

    @property
    def card(self) -> dict:
        return self.triage.card

    @property
    def file_name(self) -> str:
        return report_file_name(self.card)

    def verdict_json(self) -> dict:
        """The verdict's numbers (the CLI's ``--json`` summary)."""
        verdict, report = self.triage.verdict, self.capacity.report
        deeper = verdict.worst_late_deeper_ccr
        return {"regime": verdict.regime, "peak_z": verdict.peak.z, "peak_layer": verdict.peak.layer,
                "lowest_z": verdict.lowest.z, "lowest_layer": verdict.lowest.layer,
                "worst_late_layer": verdict.worst_late.layer if verdict.worst_late else None,
                "worst_late_z_deeper_ccr": deeper.z if deeper else None,
                "epsilon": self.capacity.geometry.stats.epsilon,
                "class": report.model_class, "capacity_status": report.status,
                "capacity_full": None if report.status == "indeterminate" else _finite(report.capacity["full"]),
                "k": self.depth.settings.ks[0], "n_tokens": self.depth.n_tokens,
                "width_rule": verdict.width_rule.to_json()}

    def html(self) -> str:
        sections = [self._header(), self._verdict(), self._geometry(), self._capacity(), self._provenance()]
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>Readout geometry: {_e(self.card['name'])}</title><style>{STYLE}</style>"
                f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>"
                + "".join(sections) + "</body></html>\n")

    def _header(self) -> str:
        card = self.card
        rows = [("Architecture", card["architecture"]), ("Blocks", card["n_layers"]), ("d_model", card["d_model"]),
                ("Vocabulary", f"{card['vocab_size']:,}"),
                ("Embeddings", "tied" if card["tied_embeddings"] else "untied"), ("Kind", card["kind"]),
                ("Weights identity", card["identity"])]
        revision = f" @ {_e(card['revision'])}" if card["revision"] else ""
        return (f"<h1>{_e(card['name'])}{revision}</h1><p class=\"note\">Readout-geometry triage report: Subspace PGA "
                "(Xu 2026) and representational capacity (Guha 2026).</p>" + _table(rows, code={"Weights identity"}))

    def _verdict(self) -> str:
        verdict, stats, report = self.triage.verdict, self.capacity.geometry.stats, self.capacity.report
        cards = [(f"Peak z (layer {verdict.peak.layer})", f"{verdict.peak.z:.1f}", "z"),
                 (f"Lowest z (layer {verdict.lowest.layer})", f"{verdict.lowest.z:.1f}", "z"),
                 ("Regime", verdict.regime, "regime")]
        deeper = verdict.worst_late_deeper_ccr
        if deeper is not None:
            cards.append((f"CCR-{deeper.ccr} at layer {verdict.worst_late.layer}", f"{deeper.z:.1f}", "ccr"))
        if verdict.worst_late is not None:
            cards.append((f"PC1 angle (layer {verdict.worst_late.layer})",
                          f"{verdict.worst_late.pc1_angle_deg:.0f} deg", "pc1"))
        cards += [("epsilon (embedding)", f"{stats.epsilon:.4f}", "epsilon"), ("Class", report.model_class, "epsilon"),
                  ("Capacity (full form)", _capacity_text(report, "full"), "capacity")]
        boxes = "".join(f"<div class=\"card\" title=\"{_e(explain(key) or '')}\">{_e(label)}<b>{_e(value)}</b></div>"
                        for label, value, key in cards)
        notes = "".join(f"<dt>{_e(title)}</dt><dd>{_e(text)}</dd>" for title, text in glossary().values())
        return (f"<h2>Verdict</h2><p>{_e(self.triage.pga.describe())}.</p><div class=\"cards\">{boxes}</div>"
                f"<p class=\"note\">{_e(REGIMES[verdict.regime])} {_e(CLASS_NOTES[report.model_class])}</p>"
                f"<p>{_e(verdict.explain_layers())} {_e(verdict.explain_deeper())}</p>"
                f"<p>{_e(verdict.width_rule.describe())}</p>"
                + (f"<details><summary>What the numbers mean</summary><dl>{notes}</dl></details>" if notes else ""))

    def _geometry(self) -> str:
        depth = self.depth
        return ("<h2>Readout alignment</h2>"
                + _figure(depth.z_figure(title="z by layer at CCR 1, 5 and 10"),
                          "z-by-layer")
                + f"<p class=\"note\">{_e(depth.describe())}. Grey: the null band |z| <= 2. Error bars: 95 % "
                  "bootstrap interval over the null "
                  "draws. Deeper CCR removes the dominant directions: z that comes back was masked, not lost.</p>"
                + _figure(depth.pc1_figure(), "pc1-angle")
                + _figure(depth.spectral_figure(), "spectral")
                + "<p class=\"note\">PC1 angle and spectral metrics at CCR-1.</p>")

    def _capacity(self) -> str:
        capacity, report = self.capacity, self.capacity.report
        rows = [(FORMULA_LABELS[name], _capacity_text(report, name)) for name in FORMULAS]
        stats = capacity.geometry.stats
        return ("<h2>Embedding geometry and capacity</h2>"
                + _figure(capacity.histogram_figure("Input embedding: pairwise cosine similarity"), "cosines")
                + f"<p class=\"note\">mu = {stats.mu:.4f}, sigma = {stats.sigma:.4f}, epsilon = mu + 2 sigma = "
                  f"{stats.epsilon:.4f} over {stats.n_rows:,} rows ({stats.n_zero_rows} all-zero rows dropped); "
                  f"histogram of {capacity.counted()}; "
                  f"tensor <code>{_e(capacity.geometry.tensor_name)}</code>.</p>"
                + _table([("formula", "capacity at epsilon"), *rows])
                + _figure(capacity.capacity_figure(), "capacity-curves")
                + "<h3>Among the published models</h3>" + _figure(capacity.atlas_figure(), "capacity-atlas")
                + f"<p>{_e(capacity.placement)}</p><p class=\"note\">Published epsilon, d_model and class: "
                  f"{_e(SOURCE)}; capacities in the hover are this project's formulas at the published values.</p>")

    def _provenance(self) -> str:
        depth, settings = self.depth, self.depth.settings
        hidden = depth.provenance or {}
        sampling = hidden.get("spec", {}).get("sampling", {})
        rows = [("N token positions", depth.n_tokens), ("pairs", f"{depth.n_pairs:,}"), ("k", settings.ks[0]),
                ("CCR depths", ", ".join(map(str, settings.ccrs))), ("R null subspaces", settings.n_null),
                ("seed", settings.seed), ("window / skip / per window",
                                          f"{sampling.get('window')} / {sampling.get('skip')} / "
                                          f"{sampling.get('per_window')}"),
                ("text", f"{self.corpus_name} (sha256 {self.corpus_sha256})"), ("dtype", depth.dtype),
                ("hidden states computed", hidden.get("computed_at", "?")),
                *[(name, version) for name, version in sorted(self.libraries.items())]]
        return "<h2>Provenance</h2>" + _table(rows)


def report_file_name(card: dict) -> str:
    """``<model>[@<revision>].html``: a Hub id with ``--`` for ``/``, a local model by its folder or file
    name; anything but letters, digits, '.', '_', '-' and '@' replaced."""
    name = card["name"].replace("/", "--") if card["kind"] == "hub" else Path(card["name"]).name
    label = name + (f"@{card['revision']}" if card["revision"] else "")
    return re.sub(r"[^\w.@-]+", "-", label).strip("-") + ".html"


REGIMES = {"detour": "Detour: a late layer falls below the null band (small models; Xu 2026).",
           "direct": "Direct: late layers stay aligned with the readout.",
           "mixed": "Mixed: late layers sit inside the null band."}


def _e(value) -> str:
    return html.escape(str(value))


def _finite(value: float) -> float | None:
    return None if value == float("inf") else value


def _capacity_text(report, name: str) -> str:
    if report.model_class == "Class 1":
        return "indeterminate (Class 1)"
    value = report.capacity[name]
    return "infinite (over 1.8e308)" if value == float("inf") else f"{value:.4g}"


def _table(rows: list[tuple], code: set[str] = frozenset()) -> str:
    """Rows of (key, value), every cell escaped; the values of the keys in ``code`` set in ``<code>``."""
    cells = "".join(f"<tr><th>{_e(key)}</th><td>{f'<code>{_e(value)}</code>' if key in code else _e(value)}</td></tr>"
                    for key, value in rows)
    return f"<table>{cells}</table>"


def _figure(figure: go.Figure, element_id: str) -> str:
    """The figure as a div with a fixed id (plotly would pick a random one), drawing with the inline plotly.js.

    Its template is named in its own layout: plotly's default is process-wide, and importing streamlit
    swaps it for one whose placeholder colours only streamlit's frontend fills in.
    """
    own = go.Figure(figure).update_layout(template=TEMPLATE)
    return own.to_html(full_html=False, include_plotlyjs=False, div_id=element_id, config=CONFIG)
