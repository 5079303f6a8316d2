"""Linear probes per layer: logistic regression on mean-pooled hidden states, held-out accuracy
beside the majority-class baseline (the labelled texts come from ``analysis.data.labelled``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from analysis.errors import require


@dataclass(frozen=True)
class ProbeResult:
    """Held-out accuracy per layer and the majority-class baseline on the same split."""

    accuracy: np.ndarray
    baseline: float
    n_train: int
    n_test: int
    classes: list[str]


def probe_layers(pooled: np.ndarray, labels: list[str], test_share: float = 0.3, seed: int = 0) -> ProbeResult:
    """Logistic regression per layer of ``pooled`` ``[L, n, d]`` on a seeded stratified split."""
    y = np.asarray(labels)
    classes = sorted(set(labels))
    n_test = max(len(classes), int(round(test_share * len(y))))
    require(len(y) - n_test >= len(classes), f"{len(y)} rows are too few for {len(classes)} classes with a "
                                             "held-out split; give more rows.")
    rare = [c for c in classes if labels.count(c) < 2]
    require(not rare, f"Class(es) {rare[:5]} have a single row; a held-out split needs at least two of each.")
    train, test = train_test_split(np.arange(len(y)), test_size=n_test, stratify=y, random_state=seed)
    values, counts = np.unique(y[train], return_counts=True)
    majority = values[np.argmax(counts)]
    accuracy = []
    for layer in pooled:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        model.fit(layer[train], y[train])
        accuracy.append(float((model.predict(layer[test]) == y[test]).mean()))
    return ProbeResult(np.array(accuracy), float((y[test] == majority).mean()), len(train), len(test), classes)
