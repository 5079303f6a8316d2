"""The models this machine holds without a download, for presets such as the width ladder.

The built-in model (once fetched), the demo series (the final checkpoint of each width, once trained) and
every model in the local Hugging Face cache, each with its d_model from its configuration alone.
"""

from __future__ import annotations

from huggingface_hub import scan_cache_dir
from huggingface_hub.errors import CacheNotFound

from analysis.errors import InputError
from analysis.models.builtin import BUILTIN_NAME, builtin_gguf_path
from analysis.models.card import describe
from analysis.models.refs import list_local_checkpoints, resolve
from analysis.storage.paths import cache_dir


def _candidates() -> list[str]:
    names = [BUILTIN_NAME] if builtin_gguf_path().exists() else []
    demo = cache_dir() / "train-demo"
    if demo.is_dir():
        names += [str(folder) for folder in sorted(demo.iterdir()) if list_local_checkpoints(folder)]
    try:
        names += sorted(repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "model")
    except CacheNotFound:
        pass
    return names


def models_at_hand() -> list[tuple[str, int]]:
    """``(reference, d_model)`` of every model at hand, ordered by d_model (then name); one that cannot be
    described (a partial download, an unsupported configuration) is left out."""
    found = []
    for name in _candidates():
        try:
            found.append((name, int(describe(resolve(name, weights=False))["d_model"])))
        except (InputError, OSError, ValueError):
            continue
    return sorted(found, key=lambda pair: (pair[1], pair[0]))
