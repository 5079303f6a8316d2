"""The model card from the configuration alone (no weights loaded): fast even for a 7B model."""

from __future__ import annotations

from analysis.models import arch
from analysis.models.loading import converted_gguf
from analysis.models.refs import ModelRef, hub_checkpoints, list_local_checkpoints


def causal_lm_class(model_type: str) -> str:
    """The transformers class name for a model type, e.g. ``llama`` -> ``LlamaForCausalLM``."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, model_type)


def describe(ref: ModelRef, trust_remote_code: bool = False) -> dict:
    """``architecture``, ``model_type``, ``n_layers``, ``d_model``, ``vocab_size``,
    ``tied_embeddings``, ``identity``, ``kind``, ``revision`` and ``checkpoints`` (steps)."""
    folder, kwargs = ref.path, ({"gguf_file": ref.gguf_file} if ref.gguf_file else {})
    if ref.gguf_file and (converted_gguf(ref) / "config.json").exists():  # not the GGUF: parsing its vocabulary takes s
        folder, kwargs = converted_gguf(ref), {}
    config = arch.read_config(folder, ref.name, trust_remote_code, **kwargs)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    checkpoints = (list_local_checkpoints(ref.path.parent) if ref.kind == "checkpoint"
                   else hub_checkpoints(ref.name) if ref.kind == "hub" else [])
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
