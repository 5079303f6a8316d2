"""Tiny random models and a tokenizer trained offline: shared by the tests and the training demo.

``tiny_config`` builds a config of a few thousand parameters for each supported family;
``expected_parameters`` counts what that config must produce, so a misspelled config attribute
that silently builds a full-size model is caught.
"""

from __future__ import annotations

from pathlib import Path

import torch

FAMILIES = ("gpt_neox", "llama", "gpt2")


def train_tokenizer(text: str, vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on ``text`` (no download), with a BOS/EOS token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator([text], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def tiny_config(family: str, vocab_size: int, d_model: int = 32, n_layers: int = 3,
                tied: bool = False, n_heads: int = 4):
    """A small config of ``family`` (gpt_neox, llama or gpt2)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    if family == "gpt_neox":
        return GPTNeoXConfig(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                             num_attention_heads=n_heads, intermediate_size=4 * d_model,
                             max_position_embeddings=512, tie_word_embeddings=tied,
                             bos_token_id=0, eos_token_id=0)
    if family == "llama":
        return LlamaConfig(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                           num_attention_heads=n_heads, num_key_value_heads=n_heads // 2,
                           intermediate_size=3 * d_model, max_position_embeddings=512,
                           tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    if family == "gpt2":
        return GPT2Config(vocab_size=vocab_size, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                          n_positions=512, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)
    raise ValueError(f"family {family!r} is not one of {FAMILIES}")


def expected_parameters(family: str, vocab_size: int, d_model: int = 32, n_layers: int = 3,
                        tied: bool = False, n_heads: int = 4) -> int:
    """Parameter count that ``tiny_config(...)`` must give (counted by hand from each architecture)."""
    v, d, L = vocab_size, d_model, n_layers
    head = 0 if tied else v * d
    if family == "gpt_neox":  # qkv+dense with biases, 2 LayerNorms, 4d MLP with biases
        block = (3 * d * d + 3 * d) + (d * d + d) + 2 * (2 * d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
        return v * d + L * block + 2 * d + head
    if family == "llama":  # q, o: d x d; k, v: d x d/2 (GQA); gate/up/down 3d; 2 RMSNorms
        kv = d // n_heads * (n_heads // 2)
        block = 2 * d * d + 2 * d * kv + 3 * d * 3 * d + 2 * d
        return v * d + L * block + d + head
    if family == "gpt2":  # c_attn, c_proj, 2 LayerNorms, MLP 4d, all with biases; learned positions
        block = (d * 3 * d + 3 * d) + (d * d + d) + 2 * (2 * d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
        return v * d + 512 * d + L * block + 2 * d + head
    raise ValueError(family)


def save_tiny_model(folder: Path, family: str, tokenizer, tied: bool = False, seed: int = 0,
                    **sizes) -> Path:
    """Build a seeded random ``family`` model and save it with ``tokenizer`` via save_pretrained."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, len(tokenizer), tied=tied, **sizes)
    torch.manual_seed(seed)  # transformers initialises from the global generator
    model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
