"""Next-token loss on held-out windows of the same corpus the geometry is measured on."""

from __future__ import annotations

import numpy as np
import torch

from analysis.data.corpus import Sampling, TokenSample
from analysis.errors import require
from analysis.models.loading import LoadedModel


def heldout_windows(token_ids: np.ndarray, sample: TokenSample, sampling: Sampling, n_windows: int,
                    bos: int | None = None) -> np.ndarray:
    """``[n_windows, window]`` windows the PGA sample did not use, drawn with the sampling seed."""
    body = sampling.window - (bos is not None)
    total = len(token_ids) // body
    used = set((sample.starts // body).tolist())
    free = np.array([w for w in range(total) if w not in used])
    require(len(free) >= 1, "No windows are left for the held-out loss: the sample used all of them.")
    chosen = np.sort(np.random.default_rng([sampling.seed, 7]).choice(free, min(n_windows, len(free)),
                                                                        replace=False))
    windows = np.stack([token_ids[w * body:(w + 1) * body] for w in chosen])
    if bos is not None:
        windows = np.concatenate([np.full((len(windows), 1), bos, dtype=np.int64), windows], axis=1)
    return windows


def mean_loss(loaded: LoadedModel, windows: np.ndarray, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats per token) of the model over ``windows``."""
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(windows), batch_size):
            batch = torch.as_tensor(windows[start:start + batch_size], device=loaded.device)
            logits = loaded.model(batch).logits[:, :-1].float()
            losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                       batch[:, 1:].reshape(-1), reduction="sum")
            total += float(losses)
            count += batch[:, 1:].numel()
    return total / count
