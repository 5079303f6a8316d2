"""Where a causal LM keeps its blocks, its final norm and its two token matrices, read from the model.

W_E and W_U come from transformers' own ``get_input_embeddings()`` / ``get_output_embeddings()``; the
blocks are the base model's module list with one entry per layer of the config; the final norm is the
last normalisation module of the base model outside the blocks. ``hidden.extract`` checks the last two
on the first batch (the norm of the captured input equals the last hidden state), so a model that breaks
these rules fails with a message, never with wrong numbers. Every causal LM transformers can build
without remote code is read this way (OPT, Falcon, StableLM, Qwen2, Gemma-2, Phi, GPT-2, GPT-NeoX and
Llama are tested); encoders and encoder-decoders are refused with the reason. ``QUIRKS`` lists what
the rules cannot see, each with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM

from analysis.errors import InputError


def _opt_projects_its_readout(config) -> str | None:
    if getattr(config, "word_embed_proj_dim", config.hidden_size) != config.hidden_size:
        return (f"its unembedding reads a {config.word_embed_proj_dim}-dimensional projection of the "
                f"{config.hidden_size}-dimensional hidden states (project_out), so the readout subspace and "
                "the states do not share a space")
    return None


QUIRKS: dict[str, Callable] = {
    # model_type -> check(config) giving the reason the model cannot be analysed, or None
    "opt": _opt_projects_its_readout,  # OPT-350m: W_U in 512 dimensions, hidden states in 1024
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


def check_supported(config) -> None:
    """Raise InputError unless ``config`` describes a causal (decoder-only) LM with a readout to analyse."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", "?")
    if getattr(config, "is_encoder_decoder", False) or model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise InputError(
            f"Model type {model_type!r} is not a causal (decoder-only) language model: it is an "
            "encoder or encoder-decoder, with no next-token readout to analyse. Choose a decoder "
            "such as Pythia, Llama or GPT-2."
        )
    remote = "AutoModelForCausalLM" in (getattr(config, "auto_map", None) or {})
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not remote:
        raise InputError(f"Model type {model_type!r} is not a causal language model this version of transformers "
                         "knows (it has no AutoModelForCausalLM class).")
    reason = QUIRKS[model_type](config) if model_type in QUIRKS else None
    if reason:
        raise InputError(f"Model type {model_type!r} cannot be analysed here: {reason}.")


def skeleton(config, trust_remote_code: bool = False) -> nn.Module:
    """The model of ``config`` on the meta device: its module names and shapes, no memory, no weights read."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)


def stored_name(model: nn.Module, tensor: torch.Tensor, stored: Iterable[str]) -> str | None:
    """Which of the checkpoint's tensor names ``stored`` transformers' loader puts into ``tensor`` of
    ``model`` (its renamings, e.g. GPT-NeoX's ``embed_out`` -> ``lm_head``, and its base-model prefix);
    None when none does."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightRenaming, rename_source_key

    wanted = {name for name, parameter in model.named_parameters(remove_duplicate=False) if parameter is tensor}
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if not isinstance(t, WeightRenaming)]
    names = model.state_dict(keep_vars=True)
    return next((key for key in stored
                 if rename_source_key(key, renamings, converters, model.base_model_prefix, names)[0] in wanted), None)


def layers(model: nn.Module) -> nn.ModuleList:
    """The transformer blocks, in order: the base model's module list with one entry per layer of the config
    (the one with most parameters, should there be several)."""
    wanted = model.config.get_text_config().num_hidden_layers
    lists = [module for module in model.base_model.modules()
             if isinstance(module, nn.ModuleList) and len(module) == wanted]
    if not lists:
        raise InputError(f"Model {type(model).__name__} has no list of {wanted} blocks (num_hidden_layers).")
    return max(lists, key=lambda blocks: sum(p.numel() for p in blocks.parameters()))


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, (nn.LayerNorm, nn.RMSNorm)) or type(module).__name__.endswith("Norm")


def final_norm(model: nn.Module) -> nn.Module:
    """The norm applied to the last block's output before the unembedding: the last normalisation module
    the base model registers outside its blocks."""
    inside = {id(module) for module in layers(model).modules()}
    norms = [module for module in model.base_model.modules() if _is_norm(module) and id(module) not in inside]
    if not norms:
        raise InputError(f"Model {type(model).__name__} has no final norm outside its blocks, which the hidden "
                         "states' convention (the last entry after the final norm) needs.")
    return norms[-1]


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
    if w_u is w_e or (w_u.device.type != "meta" and w_u.data_ptr() == w_e.data_ptr()):
        return True
    return w_u.device.type != "meta" and w_u.shape == w_e.shape and bool(torch.equal(w_u, w_e))


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
