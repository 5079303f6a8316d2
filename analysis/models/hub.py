"""The Hugging Face Hub path: revision -> commit SHA -> local snapshot folder.

Online, the revision (branch, tag or SHA) is resolved to its commit SHA first and only that SHA is
downloaded, so config, tokenizer and weights always come from one commit. With the Hub out of reach
the local Hugging Face cache is used for that revision; if it holds nothing the error says what to do.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download, try_to_load_from_cache
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

from analysis.errors import InputError

TIMEOUT_S = 10.0


def snapshot_patterns(allow_pickle: bool) -> list[str]:
    """Files a snapshot needs: configs, tokenizer files, safetensors (and .bin only if allowed)."""
    patterns = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
    return patterns + (["*.bin"] if allow_pickle else [])


def resolve_hub(repo_id: str, revision: str | None, allow_pickle: bool = False,
                cache_dir: str | Path | None = None, weights: bool = True) -> tuple[str, Path]:
    """Return (commit SHA, local snapshot folder) for ``repo_id`` at ``revision`` (default "main").

    With ``weights=False`` only the JSON files (config, safetensors index) are fetched.
    """
    revision = revision or "main"
    try:
        sha = commit_sha(repo_id, revision)
        offline = False
    except InputError:
        raise
    except Exception as error:  # no network, DNS failure, timeout, offline mode
        sha = cached_commit(repo_id, revision, cache_dir)
        if sha is None:
            raise InputError(
                f"The Hugging Face Hub is out of reach ({type(error).__name__}: {error}) and the local "
                f"cache holds no snapshot of {repo_id!r} at revision {revision!r}. Connect to the "
                f"Internet once, or copy the model into a folder and give that folder instead."
            ) from None
        offline = True
    patterns = snapshot_patterns(allow_pickle) if weights else ["*.json"]
    folder = snapshot_download(repo_id, revision=sha, allow_patterns=patterns,
                               cache_dir=cache_dir, local_files_only=offline)
    return sha, Path(folder)


def commit_sha(repo_id: str, revision: str) -> str:
    """Ask the Hub which commit ``revision`` names; InputError for an unknown repo or revision."""
    if constants.HF_HUB_OFFLINE:
        raise ConnectionError("HF_HUB_OFFLINE is set")
    try:
        return HfApi().model_info(repo_id, revision=revision, timeout=TIMEOUT_S).sha
    except RevisionNotFoundError:
        raise InputError(f"Revision {revision!r} does not exist for model {repo_id!r} on the Hub.") from None
    except GatedRepoError:
        raise InputError(f"Model {repo_id!r} is gated: accept its licence on the Hub and log in "
                         "(`hf auth login`).") from None
    except RepositoryNotFoundError:
        raise InputError(f"Model {repo_id!r} does not exist on the Hugging Face Hub "
                         "(or is private: log in with `hf auth login`).") from None


def cached_commit(repo_id: str, revision: str, cache_dir: str | Path | None = None) -> str | None:
    """The commit SHA whose snapshot the local HF cache holds for ``revision`` (a SHA, or a ref it
    recorded): the folder ``try_to_load_from_cache`` finds the snapshot's config.json in."""
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=revision)
    return Path(found).parent.name if isinstance(found, str) else None


def hub_step_branches(repo_id: str) -> list[int] | None:
    """Steps of the repo's ``step<N>`` branches, or None when the Hub cannot be asked."""
    if constants.HF_HUB_OFFLINE:
        return None
    try:
        refs = HfApi().list_repo_refs(repo_id)
    except Exception:
        return None
    steps = [int(b.name[4:]) for b in refs.branches if re.match(r"^step\d+$", b.name)]
    return steps


def fetch_file(repo_id: str, sha: str, filename: str) -> Path:
    """One file of a commit, from the local cache or the Hub."""
    return Path(hf_hub_download(repo_id, filename, revision=sha, local_files_only=constants.HF_HUB_OFFLINE))


def published_weight_hashes(repo_id: str, sha: str) -> str | None:
    """SHA-256 over the weight files' hashes the Hub publishes for a commit; None when unreachable."""
    if constants.HF_HUB_OFFLINE:
        return None
    try:
        info = HfApi().model_info(repo_id, revision=sha, files_metadata=True, timeout=TIMEOUT_S)
    except Exception:
        return None
    files = sorted((s.rfilename, s.lfs.sha256) for s in info.siblings or []
                   if s.lfs is not None and s.rfilename.endswith((".safetensors", ".bin")))
    return hashlib.sha256(repr(files).encode()).hexdigest() if files else None
