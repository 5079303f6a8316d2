"""The capacity atlas: where a model's embedding geometry sits among the 45 published models.

The published numbers are Table 1 (Appendix D) of Guha (2026), shipped as printed in
``analysis/capacity/data/published_table1.csv`` (see the README beside it): name, Hub id, d_model,
epsilon, class. Capacities are not published; they are computed from (d_model, epsilon) by the project's
own formulas. The paper's finding is a pattern: Class 1 (epsilon > 0.2, capacity indeterminate) holds
nearly only small models with tied embeddings; Class 2 (epsilon < 0.1) the rest.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from importlib import resources

from analysis.capacity.formulas import CapacityReport, capacity_report, classify

SOURCE = ("Guha (2026), Representational Capacity: Geometric Limits on Feature Representation in Transformer "
          "Language Models, arXiv 2606.02765, Table 1")
TABLE = "published_table1.csv"


@dataclass(frozen=True)
class PublishedModel:
    """One row of the paper's Table 1, as printed (``epsilon_printed`` is the printed string)."""

    name: str
    hub_id: str
    d_model: int
    epsilon_printed: str
    model_class: str

    @property
    def epsilon(self) -> float:
        return float(self.epsilon_printed)

    @property
    def capacity(self) -> CapacityReport:
        """The project's formulas at the published (d_model, epsilon)."""
        return capacity_report(self.d_model, self.epsilon)


@functools.cache
def published_models() -> tuple[PublishedModel, ...]:
    """The 45 published models, in the table's order."""
    text = resources.files("analysis.capacity").joinpath("data", TABLE).read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO(text))
    return tuple(PublishedModel(row["name"], row["hub_id"], int(row["d_model"]), row["epsilon"],
                                f"Class {row['class']}") for row in rows)


def find_published(name: str) -> PublishedModel | None:
    """The published model whose Hub id or printed name is ``name`` (case does not matter), else None."""
    wanted = name.strip().lower()
    return next((m for m in published_models() if wanted in (m.hub_id.lower(), m.name.lower())), None)


def nearest(d_model: int, epsilon: float, count: int = 2) -> list[PublishedModel]:
    """The published models closest in (log2 d_model, epsilon / 0.1): a width doubling counts as 0.1 of epsilon."""
    def distance(model: PublishedModel) -> float:
        return math.hypot(math.log2(model.d_model / d_model), (model.epsilon - epsilon) / 0.1)

    return sorted(published_models(), key=distance)[:count]


def placement(d_model: int, epsilon: float) -> str:
    """One line in words: the class, how many published models share it, and the nearest ones."""
    models = published_models()
    model_class = classify(epsilon)
    same = [m for m in models if m.model_class == model_class]
    close = ", ".join(f"{m.name} (d {m.d_model}, epsilon {m.epsilon:.3f})" for m in nearest(d_model, epsilon))
    if not same:
        return (f"epsilon {epsilon:.2f}: {model_class}, where none of the {len(models)} published models lies; "
                f"nearest: {close}.")
    widths = sorted(m.d_model for m in same)
    pattern = (" (most of them small, with tied embeddings, the paper finds)" if model_class == "Class 1"
               else " (the larger models, the paper finds)")
    return (f"epsilon {epsilon:.2f}: {model_class}, like {len(same)} of the {len(models)} published models{pattern}; "
            f"their d_model spans {widths[0]:,}-{widths[-1]:,}. Nearest: {close}.")


@dataclass(frozen=True)
class Measured:
    """A published model measured here: its published and measured epsilon."""

    published: PublishedModel
    epsilon: float
    identity: str

    @property
    def difference(self) -> float:
        """Measured minus published epsilon."""
        return self.epsilon - self.published.epsilon

    def describe(self) -> str:
        return (f"{self.published.name}: measured epsilon {self.epsilon:.5f}, published "
                f"{self.published.epsilon_printed} (difference {self.difference:+.5f}; weights {self.identity}).")

    def to_json(self) -> dict:
        return {"name": self.published.name, "hub_id": self.published.hub_id, "d_model": self.published.d_model,
                "epsilon_published": self.published.epsilon, "epsilon_measured": self.epsilon,
                "difference": self.difference, "identity": self.identity, "source": SOURCE}
