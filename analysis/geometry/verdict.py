"""The triage verdict at a glance, from per-layer PGA results and the embedding statistics.

Regime (Xu 2026): "detour" when some late layer (relative depth >= 0.6, the final entry excluded
since it often recovers) has z below -2, the lower edge of the null band; "direct" when every late
layer stays above +2; "mixed" otherwise. A layer whose z is undefined (identical states, e.g. a text of
one repeated token at the embeddings) takes no part in the peak, the lowest or the worst late layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.capacity.formulas import CapacityReport
from analysis.geometry.pga import LayerPGA

LATE_DEPTH = 0.6
BAND = 2.0


@dataclass(frozen=True)
class Verdict:
    peak: LayerPGA
    lowest: LayerPGA
    regime: str
    worst_late: LayerPGA | None
    worst_late_deeper_ccr: LayerPGA | None
    capacity: CapacityReport


def late_layers(results: list[LayerPGA]) -> list[LayerPGA]:
    """Layers at relative depth >= LATE_DEPTH, without the final entry."""
    last = max(r.layer for r in results)
    return [r for r in results if LATE_DEPTH <= r.layer / last and r.layer != last]


def regime(results: list[LayerPGA]) -> str:
    late = late_layers(results)
    if any(r.z < -BAND for r in late):
        return "detour"
    if late and all(r.z > BAND for r in late):
        return "direct"
    return "mixed"


def defined(results: list[LayerPGA]) -> list[LayerPGA]:
    """The layers with a finite z (all of them when none has one)."""
    return [r for r in results if math.isfinite(r.z)] or results


def worst_late_layer(results: list[LayerPGA]) -> LayerPGA | None:
    late = defined(late_layers(results))
    return min(late, key=lambda r: r.z) if late else None


def verdict(results: list[LayerPGA], deeper_ccr: LayerPGA | None, capacity: CapacityReport) -> Verdict:
    """``results``: one run over all layers; ``deeper_ccr``: the worst late layer at a deeper CCR."""
    scored = defined(results)
    return Verdict(max(scored, key=lambda r: r.z), min(scored, key=lambda r: r.z), regime(results),
                   worst_late_layer(results), deeper_ccr, capacity)
