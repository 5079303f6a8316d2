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


DETOUR_UP_TO, ALIGNED_FROM = 1024, 2048  # Xu 2026: d_model <= 1024 take a detour, >= 2048 stay aligned
WIDTH_RULE = ("The PGA paper's width rule (Xu 2026): models with d_model <= 1024 take a detour as training goes on "
              "(late layers fall below the null band while the final layer recovers); models with d_model >= 2048 "
              "stay aligned.")


@dataclass(frozen=True)
class WidthRule:
    """Where a model's width falls under the paper's rule, and whether its regime agrees."""

    d_model: int
    regime: str

    @property
    def expected(self) -> str | None:
        """The regime the rule predicts: ``detour``, ``direct``, or None between the paper's two groups."""
        return "detour" if self.d_model <= DETOUR_UP_TO else "direct" if self.d_model >= ALIGNED_FROM else None

    @property
    def agrees(self) -> bool | None:
        """True or False when the rule predicts and the regime is clear; None otherwise (no prediction, mixed)."""
        return None if self.expected is None or self.regime == "mixed" else self.regime == self.expected

    def describe(self) -> str:
        side = {"detour": "on the detour side", "direct": "on the aligned side"}.get(
            self.expected, "between the two groups the paper measured, where the rule predicts neither")
        text = f"{WIDTH_RULE} This model's d_model = {self.d_model} is {side}."
        if self.agrees is True:
            return f"{text} Its regime, {self.regime}, agrees."
        if self.agrees is False:
            return (f"{text} Its regime, {self.regime}, does not agree: that is a finding about this model (a "
                    "checkpoint early in training, another architecture or other data can differ), not an error.")
        if self.regime == "mixed" and self.expected:
            return f"{text} Its regime, mixed (late layers inside the null band), neither agrees nor disagrees."
        return text

    def to_json(self) -> dict:
        return {"d_model": self.d_model, "expected": self.expected, "regime": self.regime, "agrees": self.agrees}


@dataclass(frozen=True)
class Verdict:
    peak: LayerPGA
    lowest: LayerPGA
    regime: str
    worst_late: LayerPGA | None
    worst_late_deeper_ccr: LayerPGA | None
    capacity: CapacityReport
    late: tuple[int, ...] = ()  # the layers the regime reads
    final: LayerPGA | None = None  # the last entry, read apart

    @property
    def width_rule(self) -> WidthRule:
        return WidthRule(self.capacity.d, self.regime)

    def explain_layers(self) -> str:
        """Which layers the regime reads and why the final one is apart, in one sentence."""
        if not self.late or self.final is None:
            return "The model has too few layers for a late-layer regime."
        return (f"The regime reads layers {self.late[0]}-{self.late[-1]} (relative depth >= {LATE_DEPTH}); the final "
                f"layer {self.final.layer} (z {self.final.z:.1f}) is read apart: it feeds the unembedding and often "
                "recovers even where a model takes the detour.")

    def explain_deeper(self) -> str:
        """What the deeper CCR at the worst late layer says, in one sentence ("" when it was not computed)."""
        deeper, worst = self.worst_late_deeper_ccr, self.worst_late
        if deeper is None or worst is None:
            return ""
        meaning = ("back above the null band: a few dominant directions masked the alignment, they did not destroy it"
                   if deeper.z > BAND else "still below the null band: the misalignment is not in a few dominant "
                   "directions alone" if deeper.z < -BAND else "inside the null band: removing the dominant "
                   "directions takes the misalignment away, and no alignment shows beneath it")
        return (f"CCR-{deeper.ccr} at layer {worst.layer}: z = {deeper.z:.1f} with the top {deeper.ccr} principal "
                f"components removed instead of {worst.ccr} ({deeper.z - worst.z:+.1f}), {meaning}.")


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
    final = max(results, key=lambda r: r.layer)
    return Verdict(max(scored, key=lambda r: r.z), min(scored, key=lambda r: r.z), regime(results),
                   worst_late_layer(results), deeper_ccr, capacity, tuple(r.layer for r in late_layers(results)), final)
