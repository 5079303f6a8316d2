"""Every architecture quirk in one place: where the blocks, the final norm and the unembedding live.

Supported decoder families (``config.model_type``): GPT-NeoX (Pythia), Llama (SmolLM2), Mistral,
Qwen2/3, OLMo/OLMo-2 (``-hf`` ports), Gemma/Gemma-2/Gemma-3 text, Phi/Phi-3 and GPT-2. Anything else
fails with a message that lists these; encoder-only models fail with a message that says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoConfig

from analysis.errors import InputError


@dataclass(frozen=True)
class Layout:
    """Dotted module paths of one family, and the weight names its checkpoints store W_E and W_U under."""

    layers: str
    final_norm: str
    embedding_weight: str
    unembedding_weight: str


_LLAMA_LIKE = Layout("model.layers", "model.norm", "model.embed_tokens.weight", "lm_head.weight")

ARCHITECTURES: dict[str, Layout] = {
    "gpt_neox": Layout("gpt_neox.layers", "gpt_neox.final_layer_norm", "gpt_neox.embed_in.weight",
                       "embed_out.weight"),
    "gpt2": Layout("transformer.h", "transformer.ln_f", "transformer.wte.weight", "lm_head.weight"),
    "phi": Layout("model.layers", "model.final_layernorm", "model.embed_tokens.weight", "lm_head.weight"),
    **{
        name: _LLAMA_LIKE
        for name in ("llama", "mistral", "qwen2", "qwen3", "olmo", "olmo2", "gemma", "gemma2",
                     "gemma3_text", "phi3")
    },
}


@dataclass(frozen=True)
class Anatomy:
    """The facts a user sees on a model card.

    ``n_layers`` counts transformer blocks; hidden states have ``n_layers + 1`` entries (the
    embedding output first).
    """

    model_type: str
    architecture: str
    n_layers: int
    d_model: int
    vocab_size: int
    tied_embeddings: bool
    n_parameters: int


def read_config(folder, name: str, trust_remote_code: bool = False, **kwargs):
    """The model's transformers config, checked supported; InputError (never a traceback) for an
    unreadable one, or one that is code in the model's repository while remote code is off."""
    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code, **kwargs)
    except (ValueError, KeyError, OSError) as error:
        if "trust_remote_code" in str(error):
            raise InputError(f"Model {name!r} defines its configuration in its own code, which this project does "
                             "not run unless asked: pass --trust-remote-code if you trust it.") from None
        raise InputError(f"Cannot read the configuration of {name!r}: {error}") from None
    check_supported(config)
    return config


def context_length(config) -> int | None:
    """How many positions the model attends over (None when the config does not say)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def layout(config) -> Layout:
    """The family's :class:`Layout`; InputError for an encoder or an unmapped family."""
    check_supported(config)
    return ARCHITECTURES[config.model_type]


def check_supported(config) -> None:
    """Raise InputError unless ``config`` describes a decoder this project knows how to read."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    model_type = getattr(config, "model_type", "?")
    if model_type in ARCHITECTURES:
        return
    if getattr(config, "is_encoder_decoder", False) or model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise InputError(
            f"Model type {model_type!r} is not a causal (decoder-only) language model: it is an "
            "encoder or encoder-decoder, with no next-token readout to analyse. Choose a decoder "
            "such as Pythia, Llama or GPT-2."
        )
    raise InputError(
        f"Model type {model_type!r} is not mapped in this project. "
        f"Supported: {', '.join(sorted(ARCHITECTURES))}. Add it to analysis/models/arch.py."
    )


def layers(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks, in order."""
    return model.get_submodule(layout(model.config).layers)


def final_norm(model: nn.Module) -> nn.Module:
    """The norm applied to the last block's output before the unembedding."""
    return model.get_submodule(layout(model.config).final_norm)


def unembedding(model: nn.Module) -> torch.Tensor:
    """W_U, shape ``[V, d]``: the matrix mapping a final hidden state to next-token logits."""
    head = model.get_output_embeddings()
    if head is None or getattr(head, "weight", None) is None:
        raise InputError(f"Model {type(model).__name__} has no unembedding (output embeddings).")
    return head.weight


def embedding(model: nn.Module) -> torch.Tensor:
    """W_E, shape ``[V, d]``: the input token embedding."""
    table = model.get_input_embeddings()
    if table is None or getattr(table, "weight", None) is None:
        raise InputError(f"Model {type(model).__name__} has no input embedding.")
    return table.weight


def is_tied(model: nn.Module) -> bool:
    """True when W_U and W_E are the same tensor (or equal), as in SmolLM2 and GPT-2."""
    w_u, w_e = unembedding(model), embedding(model)
    if w_u.data_ptr() == w_e.data_ptr():
        return True
    return w_u.shape == w_e.shape and bool(torch.equal(w_u, w_e))


def anatomy(model: nn.Module) -> Anatomy:
    """The model card facts, read from the modules themselves (not only the config)."""
    w_u = unembedding(model)
    return Anatomy(
        model_type=model.config.model_type,
        architecture=type(model).__name__,
        n_layers=len(layers(model)),
        d_model=int(w_u.shape[1]),
        vocab_size=int(w_u.shape[0]),
        tied_embeddings=is_tied(model),
        n_parameters=sum(p.numel() for p in model.parameters()),
    )
