"""Read one matrix (W_E or W_U) from a model's safetensors without loading the model.

The tensor is the one transformers' loader would put into ``get_input_embeddings()`` or
``get_output_embeddings()`` (``arch.stored_name``, on the model built on the meta device). Its shard is
found through ``model.safetensors.index.json`` and only that file is read (for a Hub model, only that
file is downloaded), so the embedding statistics of a 70B model need one shard and run on a laptop.
GGUF models are read from their de-quantised safetensors copy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from analysis.errors import InputError, require
from analysis.models import arch
from analysis.models.hub import fetch_file
from analysis.models.loading import gguf_as_safetensors
from analysis.models.refs import ModelRef

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


@dataclass(frozen=True)
class StoredMatrix:
    """A ``[V, d]`` matrix read from the weight files, and where it came from."""

    matrix: torch.Tensor
    tensor_name: str
    file_name: str
    tied_embeddings: bool
    model_type: str


def read_matrix(ref: ModelRef, which: str = "embedding", trust_remote_code: bool = False) -> StoredMatrix:
    """W_E (``which="embedding"``) or W_U (``"unembedding"``; W_E itself for tied models)."""
    require(which in ("embedding", "unembedding"), f"matrix must be embedding or unembedding; got {which!r}.")
    folder = _safetensors_folder(ref)
    config = arch.read_config(folder, ref.name, trust_remote_code)
    model = arch.skeleton(config, trust_remote_code)
    tied = arch.is_tied(model)
    weight_map = _weight_map(ref, folder)
    unembedding = which == "unembedding" and not tied
    name = arch.stored_name(model, arch.unembedding(model) if unembedding else arch.embedding(model), weight_map)
    if name is None and unembedding:
        raise InputError(f"Model {ref.name!r} stores no unembedding and does not tie it to the embedding: it has "
                         "no next-token readout to analyse.")
    if name is None:
        raise InputError(f"Model {ref.name!r} stores no input embedding in its weight files.")
    path = _local_file(ref, folder, weight_map[name])
    with safe_open(str(path), framework="pt") as handle:
        matrix = handle.get_tensor(name)
    return StoredMatrix(matrix, name, weight_map[name], tied, config.model_type)


def _safetensors_folder(ref: ModelRef) -> Path:
    if ref.gguf_file:
        return gguf_as_safetensors(ref)
    return ref.path


def _weight_map(ref: ModelRef, folder: Path) -> dict[str, str]:
    """tensor name -> file name, from the index or the single safetensors file."""
    if (folder / INDEX).exists():
        return json.loads((folder / INDEX).read_text())["weight_map"]
    path = _local_file(ref, folder, SINGLE)
    with safe_open(str(path), framework="pt") as handle:
        return dict.fromkeys(handle.keys(), SINGLE)


def _local_file(ref: ModelRef, folder: Path, file_name: str) -> Path:
    path = folder / file_name
    if path.exists():
        return path
    if ref.kind == "hub":
        return fetch_file(ref.name, ref.identity, file_name)
    raise InputError(f"Model {ref.name!r} has no safetensors file {file_name!r}; convert its weights "
                     "to safetensors (only safetensors are read without loading the model).")
