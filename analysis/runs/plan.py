"""A sweep plan: which models and revisions, on which text, with which settings.

A plan is a small YAML or JSON file (or the same keys given as flags)::

    models:
      - model: EleutherAI/pythia-160m      # Hub id, local folder, checkpoint folder or .gguf
        revisions: all                      # every checkpoint; or a list; or leave out for the final one
      - model: EleutherAI/pythia-410m
        revisions: [step1000, step143000]
    corpus: builtin                         # a text file, JSONL, or hf:NAME:SPLIT:COLUMN
    n_tokens: 2048
    seeds: [0, 1]                           # token sample and null subspaces
    k: [50, 100]                            # leave out for d / 4 (at most 100) per model
    ccr: [0, 1, 2]
    null_subspaces: 100
    dtype: auto                             # bfloat16 on GPUs; float32 or float16 to force one
    retries: 2                              # extra attempts per job after a failure
    allow_pickle: false                     # true to load pickled .bin weights (they can run code)

Every problem in a plan is reported at once, before anything runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analysis.data.corpus import Sampling
from analysis.errors import InputError, require
from analysis.models.devices import DTYPES
from analysis.runs.settings import DEFAULT_CCR, DEFAULT_N_NULL, SEED

KEYS = {"models", "corpus", "n_tokens", "seeds", "k", "ccr", "null_subspaces", "dtype", "retries", "allow_pickle"}


@dataclass(frozen=True)
class ModelEntry:
    """One model of a plan; ``revisions`` None = the default revision, ("all",) = every checkpoint."""

    model: str
    revisions: tuple[str, ...] | None = None

    @property
    def every_checkpoint(self) -> bool:
        return self.revisions == ("all",)


@dataclass(frozen=True)
class SweepPlan:
    """A validated plan (see the module docstring for the file format)."""

    models: tuple[ModelEntry, ...]
    corpus: str = "builtin"
    n_tokens: int = Sampling.n_tokens
    seeds: tuple[int, ...] = (SEED,)
    ks: tuple[int, ...] | None = None
    ccrs: tuple[int, ...] = (DEFAULT_CCR,)
    n_null: int = DEFAULT_N_NULL
    dtype: str = "auto"
    retries: int = 2
    allow_pickle: bool = False


def read_plan(path: str | Path) -> dict:
    """The raw mapping in a YAML or JSON plan file."""
    import yaml

    path = Path(path)
    require(path.is_file(), f"Plan file {str(path)!r} does not exist.")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise InputError(f"Plan file {str(path)!r} is not valid {path.suffix.lstrip('.') or 'YAML'}: {error}") from None
    require(isinstance(raw, dict), f"Plan file {str(path)!r} must hold a mapping with a 'models' list.")
    return raw


def _ints(raw, name: str, problems: list[str], low: int = 0) -> tuple[int, ...] | None:
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values):
        problems.append(f"{name} must be an integer >= {low} or a list of them; got {raw!r}.")
        return None
    return tuple(values)


def _model_entry(raw, problems: list[str]) -> ModelEntry | None:
    if isinstance(raw, str):
        raw = {"model": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("model"), str) or set(raw) - {"model", "revisions"}:
        problems.append(f"Each entry of 'models' needs 'model' (and optionally 'revisions'); got {raw!r}.")
        return None
    revisions = raw.get("revisions")
    if revisions is None:
        return ModelEntry(raw["model"])
    if revisions == "all":
        return ModelEntry(raw["model"], ("all",))
    revisions = revisions if isinstance(revisions, list) else [revisions]
    if not revisions or not all(isinstance(r, str | int) and not isinstance(r, bool) for r in revisions):
        problems.append(f"'revisions' of {raw['model']!r} must be 'all' or a list of revisions; got {revisions!r}.")
        return None
    return ModelEntry(raw["model"], tuple(str(r) for r in revisions))


SCALARS = {"n_tokens": ("n_tokens", 3), "null_subspaces": ("n_null", 2), "retries": ("retries", 0)}
LISTS = {"seeds": ("seeds", 0), "k": ("ks", 1), "ccr": ("ccrs", 0)}


def _numbers(raw: dict, problems: list[str]) -> dict:
    values = {}
    for key, (attribute, low) in SCALARS.items():
        parsed = _ints(raw[key], key, problems, low) if key in raw else None
        if parsed is not None and len(parsed) == 1:
            values[attribute] = parsed[0]
        elif parsed is not None:
            problems.append(f"{key} must be one integer; got {raw[key]!r}.")
    for key, (attribute, low) in LISTS.items():
        parsed = _ints(raw[key], key, problems, low) if key in raw else None
        if parsed is not None:
            values[attribute] = tuple(dict.fromkeys(parsed))
    return values


def _texts(raw: dict, problems: list[str]) -> dict:
    values = {}
    if "corpus" in raw and not (isinstance(raw["corpus"], str) and raw["corpus"]):
        problems.append(f"corpus must be a non-empty string; got {raw['corpus']!r}.")
    elif "corpus" in raw:
        values["corpus"] = raw["corpus"]
    if "dtype" in raw and raw["dtype"] not in ("auto", *DTYPES):
        problems.append(f"dtype must be one of auto, {', '.join(DTYPES)}; got {raw['dtype']!r}.")
    elif "dtype" in raw:
        values["dtype"] = raw["dtype"]
    if "allow_pickle" in raw and not isinstance(raw["allow_pickle"], bool):
        problems.append(f"allow_pickle must be true or false; got {raw['allow_pickle']!r}.")
    elif "allow_pickle" in raw:
        values["allow_pickle"] = raw["allow_pickle"]
    return values


def parse_plan(raw: dict) -> SweepPlan:
    """Validate a plan mapping; InputError listing every problem found."""
    problems = [f"Unknown key {key!r} in the plan (known: {', '.join(sorted(KEYS))})."
                for key in raw if key not in KEYS]
    models = raw.get("models")
    if not isinstance(models, list) or not models:
        problems.append("The plan needs 'models': a non-empty list of models.")
        models = []
    entries = [_model_entry(entry, problems) for entry in models]
    values = {**_numbers(raw, problems), **_texts(raw, problems)}
    require(not problems, "The plan has problems: " + " ".join(problems))
    return SweepPlan(models=tuple(entries), **values)
