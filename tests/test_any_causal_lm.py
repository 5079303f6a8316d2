"""Any causal LM transformers builds: W_E, W_U, the blocks and the final norm found from the model itself."""

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    BertConfig,
    FalconConfig,
    Gemma2Config,
    GPT2Config,
    GPTNeoXConfig,
    LlamaConfig,
    OPTConfig,
    PhiConfig,
    Qwen2Config,
    StableLmConfig,
    T5Config,
)

from analysis.activations.hidden import extract, token_sample
from analysis.data.corpus import Sampling, builtin_corpus
from analysis.errors import InputError
from analysis.models import arch
from analysis.models.loading import load
from analysis.models.refs import resolve
from analysis.models.weights import read_matrix
from analysis.storage.cache import ResultCache

D, LAYERS, HEADS = 32, 3, 4
SIZES = dict(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=256,
             bos_token_id=0, eos_token_id=0)
FAMILIES = {  # one tiny untied config per family, each built the family's own way
    "opt": lambda v: OPTConfig(vocab_size=v, ffn_dim=4 * D, word_embed_proj_dim=D, pad_token_id=0,
                               tie_word_embeddings=False, **SIZES),
    "falcon": lambda v: FalconConfig(vocab_size=v, tie_word_embeddings=False, **SIZES),
    "stablelm": lambda v: StableLmConfig(vocab_size=v, intermediate_size=3 * D, num_key_value_heads=HEADS,
                                         tie_word_embeddings=False, **SIZES),
    "qwen2": lambda v: Qwen2Config(vocab_size=v, intermediate_size=3 * D, num_key_value_heads=2,
                                   tie_word_embeddings=False, **SIZES),
    "gemma2": lambda v: Gemma2Config(vocab_size=v, intermediate_size=3 * D, num_key_value_heads=2, head_dim=8,
                                     pad_token_id=0, tie_word_embeddings=False, **SIZES),
    "phi": lambda v: PhiConfig(vocab_size=v, intermediate_size=3 * D, tie_word_embeddings=False, **SIZES),
    "gpt2": lambda v: GPT2Config(vocab_size=v, n_embd=D, n_layer=LAYERS, n_head=HEADS, n_positions=256,
                                 tie_word_embeddings=False),
    "gpt_neox": lambda v: GPTNeoXConfig(vocab_size=v, intermediate_size=4 * D, tie_word_embeddings=False, **SIZES),
    "llama": lambda v: LlamaConfig(vocab_size=v, intermediate_size=3 * D, num_key_value_heads=2, pad_token_id=0,
                                   tie_word_embeddings=False, **SIZES),
}
SAMPLING = Sampling(n_tokens=48, window=24, skip=2, per_window=8, seed=0)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def saved(request, tokenizer, tmp_path_factory):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(FAMILIES[request.param](len(tokenizer)))
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return request.param, folder


def test_states_follow_the_convention_and_match_a_plain_forward(saved, tmp_path):
    family, folder = saved
    loaded = load(resolve(str(folder)), device="cpu", dtype="float32")
    card = loaded.anatomy
    assert (card.model_type, card.n_layers, card.d_model, card.tied_embeddings) == (family, LAYERS, D, False)
    sample = token_sample(loaded, builtin_corpus(), SAMPLING, ResultCache(tmp_path))
    result = extract(loaded, sample, batch_size=2)
    assert result.states.shape == (LAYERS + 1, 48, D)
    with torch.inference_mode():
        window = torch.as_tensor(sample.windows[0])[None]
        reference = loaded.model(window, output_hidden_states=True)
        mine = np.flatnonzero(sample.rows == 0)
        for layer, hidden in enumerate(reference.hidden_states):
            np.testing.assert_allclose(result.states[layer, mine], hidden[0, sample.cols[mine]].numpy(),
                                       rtol=1e-4, atol=1e-4)
        normed = arch.final_norm(loaded.model)(torch.as_tensor(result.last_prenorm)).numpy()
        logits = reference.logits[0, sample.cols[mine]]
        readout = torch.as_tensor(result.states[-1, mine]) @ arch.unembedding(loaded.model).T
    np.testing.assert_allclose(result.states[-1], normed, rtol=1e-4, atol=1e-5)
    assert not np.allclose(result.states[-1], result.last_prenorm)
    if family != "gemma2":  # Gemma-2 soft-caps its logits
        np.testing.assert_allclose(readout.numpy(), logits.numpy(), rtol=1e-4, atol=1e-4)


def test_shard_reads_name_the_models_own_tensors(saved):
    _, folder = saved
    model = AutoModelForCausalLM.from_pretrained(folder)
    for which, matrix in (("embedding", arch.embedding(model)), ("unembedding", arch.unembedding(model))):
        stored = read_matrix(resolve(str(folder)), which)
        assert not stored.tied_embeddings
        torch.testing.assert_close(stored.matrix, matrix.detach())
    assert read_matrix(resolve(str(folder)), "unembedding").tensor_name != \
        read_matrix(resolve(str(folder)), "embedding").tensor_name


def test_a_tied_model_is_seen_tied_without_its_weights(tokenizer):
    config = FAMILIES["gemma2"](len(tokenizer))
    config.tie_word_embeddings = True
    assert arch.is_tied(arch.skeleton(config))
    assert not arch.is_tied(arch.skeleton(FAMILIES["qwen2"](len(tokenizer))))


def test_a_wrong_final_norm_is_caught_not_used(saved, tmp_path, monkeypatch):
    _, folder = saved
    loaded = load(resolve(str(folder)), device="cpu", dtype="float32")
    sample = token_sample(loaded, builtin_corpus(), SAMPLING, ResultCache(tmp_path))
    inner = next(m for m in arch.layers(loaded.model)[0].modules() if isinstance(m, torch.nn.LayerNorm)
                 or type(m).__name__.endswith("Norm"))
    monkeypatch.setattr(arch, "final_norm", lambda model: inner)
    with pytest.raises(InputError, match="final norm"):
        extract(loaded, sample)


def test_opt_with_a_projected_readout_is_refused_with_its_reason(tokenizer):
    config = OPTConfig(vocab_size=len(tokenizer), ffn_dim=4 * D, word_embed_proj_dim=16, **SIZES)
    with pytest.raises(InputError, match="project_out"):
        arch.check_supported(config)


@pytest.mark.parametrize("config", [BertConfig(), T5Config()], ids=["bert", "t5"])
def test_encoders_are_refused(config):
    with pytest.raises(InputError, match="not a causal"):
        arch.check_supported(config)
