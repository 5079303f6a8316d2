import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from analysis.errors import InputError
from analysis.models import arch
from analysis.models.refs import resolve
from analysis.models.weights import read_matrix
from analysis.runs.pipeline import embedding_unembedding_cosines, matrix_geometry
from analysis.storage.cache import ResultCache


@pytest.fixture(scope="module")
def sharded(tiny_models, tmp_path_factory):
    """The untied GPT-NeoX model re-saved in many small shards, with an index."""
    model = AutoModelForCausalLM.from_pretrained(tiny_models[("gpt_neox", False)])
    folder = tmp_path_factory.mktemp("sharded")
    model.save_pretrained(folder, max_shard_size="20KB")
    return folder, model


def test_reads_only_the_shard_holding_the_tensor(sharded, monkeypatch):
    folder, model = sharded
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    assert len(set(index.values())) > 3
    opened = []
    import analysis.models.weights as weights

    real = weights.safe_open
    monkeypatch.setattr(weights, "safe_open", lambda path, **kw: (opened.append(path), real(path, **kw))[1])
    stored = read_matrix(resolve(str(folder)), "embedding")
    assert opened == [str(folder / index["gpt_neox.embed_in.weight"])]
    torch.testing.assert_close(stored.matrix, arch.embedding(model).detach())
    unembedding = read_matrix(resolve(str(folder)), "unembedding")
    assert unembedding.tensor_name == "embed_out.weight" and not unembedding.tied_embeddings
    torch.testing.assert_close(unembedding.matrix, arch.unembedding(model).detach())


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_tied_models_read_the_embedding_as_unembedding(tiny_models, family):
    ref = resolve(str(tiny_models[(family, True)]))
    stored = read_matrix(ref, "unembedding")
    assert stored.tied_embeddings
    model = AutoModelForCausalLM.from_pretrained(ref.path)
    torch.testing.assert_close(stored.matrix, arch.embedding(model).detach())


def test_missing_unembedding_is_named(tiny_models, tmp_path):
    from safetensors.torch import load_file, save_file

    source = tiny_models[("llama", False)]
    folder = tmp_path / "headless"
    folder.mkdir()
    (folder / "config.json").write_text((source / "config.json").read_text())
    weights = {k: v for k, v in load_file(source / "model.safetensors").items() if not k.startswith("lm_head")}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(InputError, match="stores no unembedding"):
        read_matrix(resolve(str(folder)), "unembedding")


def test_matrix_geometry_is_cached_and_consistent(sharded, tmp_path):
    folder, model = sharded
    cache = ResultCache(tmp_path)
    ref = resolve(str(folder))
    geometry = matrix_geometry(ref, "embedding", device="cpu", cache=cache)
    assert geometry.stats.n_rows == 512 and geometry.stats.d == 32
    assert geometry.histogram.counts.sum() == 512 * 511 // 2
    assert geometry.histogram.mean == pytest.approx(geometry.stats.mu, abs=3e-3)
    again = matrix_geometry(ref, "embedding", device="cpu", cache=cache)
    assert again.stats == geometry.stats and np.array_equal(again.histogram.counts, geometry.histogram.counts)
    paired = embedding_unembedding_cosines(ref, cache=cache)
    assert paired.counts.sum() == 512


def test_paired_cosines_are_none_for_tied(tiny_models, tmp_path):
    ref = resolve(str(tiny_models[("llama", True)]))
    assert embedding_unembedding_cosines(ref, cache=ResultCache(tmp_path)) is None
    assert np.isfinite(matrix_geometry(ref, "unembedding", cache=ResultCache(tmp_path)).stats.epsilon)
