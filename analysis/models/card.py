"""The model card from the configuration alone (no weights loaded): fast even for a 7B model."""

from __future__ import annotations

from analysis.errors import InputError
from analysis.models import arch
from analysis.models.refs import ModelRef, list_checkpoints


def causal_lm_class(model_type: str) -> str:
    """The transformers class name for a model type, e.g. ``llama`` -> ``LlamaForCausalLM``."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, model_type)


def describe(ref: ModelRef, trust_remote_code: bool = False) -> dict:
    """``architecture``, ``model_type``, ``n_layers``, ``d_model``, ``vocab_size``,
    ``tied_embeddings``, ``identity``, ``kind``, ``revision`` and ``checkpoints`` (steps)."""
    from transformers import AutoConfig

    kwargs = {"gguf_file": ref.gguf_file} if ref.gguf_file else {}
    try:
        config = AutoConfig.from_pretrained(ref.path, trust_remote_code=trust_remote_code, **kwargs)
    except (ValueError, KeyError, OSError) as error:
        raise InputError(f"Cannot read the configuration of {ref.name!r}: {error}") from None
    arch.check_supported(config)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    series_root = ref.path.parent if ref.kind == "checkpoint" else None
    checkpoints = list_checkpoints(str(series_root) if series_root else ref.name)
    return {
        "name": ref.name,
        "kind": ref.kind,
        "revision": ref.revision,
        "identity": ref.identity,
        "architecture": (config.architectures or [causal_lm_class(config.model_type)])[0],
        "model_type": config.model_type,
        "n_layers": int(text.num_hidden_layers),
        "d_model": int(text.hidden_size),
        "vocab_size": int(text.vocab_size),
        "tied_embeddings": bool(getattr(text, "tie_word_embeddings", False)),
        "checkpoints": [c.step for c in checkpoints],
    }
