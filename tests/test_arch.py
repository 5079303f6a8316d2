import pytest
import torch
from transformers import AutoModelForCausalLM, BertConfig, CLIPVisionConfig

from analysis.errors import InputError
from analysis.models import arch
from analysis.models.tiny import expected_parameters, tiny_config


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "gpt2"])
@pytest.mark.parametrize("tied", [False, True])
def test_anatomy_of_tiny_models(family, tied):
    model = AutoModelForCausalLM.from_config(tiny_config(family, 100, tied=tied))
    card = arch.anatomy(model)
    assert card.n_parameters == expected_parameters(family, 100, tied=tied)
    assert (card.n_layers, card.d_model, card.vocab_size) == (3, 32, 100)
    assert card.tied_embeddings is tied
    assert len(arch.layers(model)) == 3
    assert isinstance(arch.final_norm(model), torch.nn.Module)
    assert arch.unembedding(model).shape == arch.embedding(model).shape == (100, 32)


def test_encoder_only_model_is_refused():
    with pytest.raises(InputError, match="not a causal"):
        arch.check_supported(BertConfig())


def test_a_config_without_a_causal_lm_class_is_refused():
    with pytest.raises(InputError, match="no AutoModelForCausalLM"):
        arch.check_supported(CLIPVisionConfig())


def test_model_without_unembedding():
    model = AutoModelForCausalLM.from_config(tiny_config("llama", 100))
    model.lm_head = None
    with pytest.raises(InputError, match="no unembedding"):
        arch.unembedding(model)
