"""Load a resolved model reference into memory: weights, tokenizer, device, dtype.

GGUF files are de-quantised by transformers on first load (about 20 s for the built-in model on a
laptop); the de-quantised weights are then kept as safetensors under the models folder, keyed by the
GGUF's SHA-256, so later loads take about a second. ``trust_remote_code`` is off unless asked for.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from analysis.errors import InputError
from analysis.models import arch
from analysis.models.devices import dtype_name, pick_device, pick_dtype
from analysis.models.refs import TOKENIZER_CORE, ModelRef, has_tokenizer
from analysis.progress import Progress, report
from analysis.storage.paths import models_dir


@dataclass
class LoadedModel:
    """A model in memory with its tokenizer, where it runs and what it is."""

    ref: ModelRef
    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    anatomy: arch.Anatomy

    @property
    def spec(self) -> dict:
        """The JSON-safe description cache keys use (identity, dtype)."""
        return {**self.ref.spec, "dtype": dtype_name(self.dtype)}


def load(ref: ModelRef, device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
         progress: Progress | None = None) -> LoadedModel:
    """Load ``ref`` on ``device`` in ``dtype``; InputError for anything this project cannot read."""
    torch_device = pick_device(device)
    torch_dtype = pick_dtype(dtype, torch_device)
    folder = gguf_as_safetensors(ref, progress) if ref.gguf_file else ref.path
    kwargs = {"trust_remote_code": trust_remote_code}
    report(progress, "load", 0, 2)
    arch.read_config(folder, ref.name, trust_remote_code)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(ref, folder), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype, **kwargs)
    except torch.OutOfMemoryError:
        raise InputError(f"Out of memory loading {ref.name!r} on {torch_device}: choose a smaller "
                         "model, a lower-precision dtype, or the CPU.") from None
    except (ValueError, OSError) as error:
        raise InputError(f"transformers cannot load {ref.name!r}: {error}") from None
    model.to(torch_device).eval()
    report(progress, "load", 2, 2)
    return LoadedModel(ref, model, tokenizer, torch_device, torch_dtype, arch.anatomy(model))


def tokenizer_folder(ref: ModelRef, folder: Path) -> Path:
    """Where the tokenizer loads from; InputError when no tokenizer is there (rather than an empty text
    later): a checkpoint without tokenizer files uses its run's folder, or the one the user gave."""
    chosen = ref.tokenizer_path or folder
    if not has_tokenizer(chosen):
        where = f"{chosen}" + (f" nor in its run's folder {chosen.parent}" if ref.kind == "checkpoint" else "")
        raise InputError(f"Model {ref.label} has no tokenizer: no {', '.join(TOKENIZER_CORE)} in {where}. Give a "
                         "folder that holds one (--tokenizer in the CLI, the Tokenizer field in the app).")
    return chosen


def converted_gguf(ref: ModelRef) -> Path:
    """Where the de-quantised safetensors copy of a GGUF model lives (:func:`gguf_as_safetensors`)."""
    return models_dir() / f"gguf-{ref.identity.split(':')[-1][:16]}"


def gguf_as_safetensors(ref: ModelRef, progress: Progress | None = None) -> Path:
    """The de-quantised safetensors copy of a GGUF model, made on first use (atomic rename)."""
    converted = converted_gguf(ref)
    remove_stale_partials(converted)
    if (converted / "config.json").exists():
        return converted
    report(progress, "convert GGUF (first load only)", 0, 1)
    source = {"gguf_file": ref.gguf_file}
    try:
        with _gguf_parsed_once():
            model = AutoModelForCausalLM.from_pretrained(ref.path, dtype=torch.float32, **source)
            tokenizer = AutoTokenizer.from_pretrained(ref.path, **source)
    except (ValueError, KeyError, OSError, RuntimeError, struct.error) as error:
        raise InputError(f"transformers cannot load the GGUF file {ref.name!r}: {error}") from None
    partial = converted.with_name(f"{converted.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.hf_quantizer = None  # the weights are de-quantised floats now: save them as such
    model.config.quantization_config = None
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    try:
        partial.rename(converted)  # atomic; a concurrent loader may have won the race
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    del model
    gc.collect()
    report(progress, "convert GGUF (first load only)", 1, 1)
    return converted


_GGUF_PATCHED = threading.Lock()  # held while gguf's functions are replaced (:func:`_gguf_parsed_once`)


@contextlib.contextmanager
def _gguf_parsed_once():
    """While transformers reads a GGUF (its config, weights and tokenizer): gguf's reader made once per file and its
    tensor-name map once per architecture, where transformers makes them again at each step. For the built-in model
    it parsed the file's metadata three times (3.4 s each on a laptop) and built the name map for each of the model's
    397 modules (4.5 s), of a 14 s conversion (BENCHMARKS.md). Both are read, never changed, by transformers. One
    conversion at a time in the process, so that gguf's own functions are always the ones put back."""
    import gguf

    with _GGUF_PATCHED:
        reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
        gguf.GGUFReader, gguf.get_tensor_name_map = functools.lru_cache(2)(reader), functools.lru_cache(8)(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def remove_stale_partials(converted: Path) -> None:
    """Delete ``<converted>.partial-<pid>`` folders whose converting process is gone (killed mid-way)."""
    for partial in converted.parent.glob(f"{converted.name}.partial-*"):
        pid = partial.name.rpartition("-")[2]
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
