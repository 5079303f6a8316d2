"""Mean-pooled hidden states of whole texts, every layer: the units probes and cross-model
comparisons share (each model tokenises the same texts its own way)."""

from __future__ import annotations

import numpy as np
import torch

from analysis.errors import InputError, require
from analysis.models.loading import LoadedModel
from analysis.progress import Progress, report


def pooled_states(loaded: LoadedModel, texts: list[str], max_tokens: int = 64, batch_size: int = 16,
                  progress: Progress | None = None) -> np.ndarray:
    """``[n_layers + 1, len(texts), d]`` float32: each text's hidden states averaged over its tokens
    (first ``max_tokens`` tokens, no special tokens)."""
    require(len(texts) >= 1, "No texts to pool.")
    tokenizer, model = loaded.tokenizer, loaded.model
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"][:max_tokens] for t in texts]
    empty = [i for i, ids in enumerate(encoded) if not ids]
    require(not empty, f"Text(s) {empty[:5]} have no tokens; remove empty texts.")
    out = np.empty((loaded.anatomy.n_layers + 1, len(texts), loaded.anatomy.d_model), np.float32)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    try:
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                report(progress, "pooled states", start, len(texts))
                chunk = encoded[start:start + batch_size]
                width = max(len(ids) for ids in chunk)
                ids = torch.tensor([x + [pad] * (width - len(x)) for x in chunk], device=loaded.device)
                mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in chunk], device=loaded.device)
                hidden = model.base_model(ids, attention_mask=mask, output_hidden_states=True).hidden_states
                weights = (mask / mask.sum(1, keepdim=True)).unsqueeze(-1).to(hidden[0].dtype)
                for layer, states in enumerate(hidden):
                    out[layer, start:start + len(chunk)] = (states * weights).sum(1).float().cpu().numpy()
    except torch.OutOfMemoryError:
        raise InputError(f"Out of memory pooling texts on {loaded.device}: lower the batch size.") from None
    report(progress, "pooled states", len(texts), len(texts))
    return out
