"""Hidden states of every layer, for sampled token positions, in one batched pass per window batch.

Convention (tested): ``states[0]`` is the embedding output, ``states[l]`` the residual stream after
block ``l``, and ``states[-1]``, as Hugging Face returns it, has the model's final norm applied (it
is what the unembedding reads). ``last_prenorm`` is the last block's output before that norm.
Only the transformer body runs (``model.base_model``): the LM head is skipped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from analysis.data.corpus import Corpus, Sampling, TokenSample, bos_token, sample_positions, tokenize
from analysis.errors import InputError, require
from analysis.geometry.pga import check_layers
from analysis.models import arch
from analysis.models.loading import LoadedModel
from analysis.progress import Progress, report
from analysis.storage.cache import Entry, ResultCache, default_cache
from analysis.storage.codec import storable

HIDDEN_VERSION = 1
TOKENS_VERSION = 2


@storable
@dataclass(frozen=True)
class HiddenStates:
    """Hidden states at sampled positions.

    Attributes:
        states: ``[n_layers + 1, N, d]`` float32; see the module docstring for the convention.
        last_prenorm: ``[N, d]`` float32, last block output before the final norm.
        sample: which tokens (windows, positions) the rows are.
    """

    states: np.ndarray
    last_prenorm: np.ndarray
    sample: TokenSample

    @property
    def n_layers(self) -> int:
        """Number of entries in ``states`` (blocks + 1)."""
        return self.states.shape[0]

    def layer(self, index: int) -> np.ndarray:
        """``[N, d]`` states of one entry; InputError for an index out of range."""
        check_layers([index], self.n_layers)
        return self.states[index]


def extract(loaded: LoadedModel, sample: TokenSample, batch_size: int = 8,
            progress: Progress | None = None) -> HiddenStates:
    """Run the transformer body over ``sample.windows`` in batches and gather the sampled rows."""
    model, device = loaded.model, loaded.device
    body, norm = model.base_model, arch.final_norm(model)
    captured: list[torch.Tensor] = []
    hook = norm.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    windows = torch.as_tensor(sample.windows, dtype=torch.long)
    n_windows = len(windows)
    states = np.empty((loaded.anatomy.n_layers + 1, len(sample.rows), loaded.anatomy.d_model), np.float32)
    last_prenorm = np.empty(states.shape[1:], np.float32)
    try:
        with torch.inference_mode():
            for first in range(0, n_windows, batch_size):
                report(progress, "forward pass", first, n_windows)
                captured.clear()
                chosen = np.flatnonzero((sample.rows >= first) & (sample.rows < first + batch_size))
                rows = torch.as_tensor(sample.rows[chosen] - first)
                cols = torch.as_tensor(sample.cols[chosen])
                output = body(windows[first:first + batch_size].to(device), output_hidden_states=True,
                              use_cache=False)
                if first == 0:
                    _check_convention(model, norm, output.hidden_states, captured, states.shape[0])
                for index, hidden in enumerate(output.hidden_states):
                    states[index, chosen] = hidden[rows, cols].float().cpu().numpy()
                last_prenorm[chosen] = captured[-1][rows, cols].float().cpu().numpy()
    except torch.OutOfMemoryError:
        raise InputError(f"Out of memory in the forward pass on {device}: lower the batch size "
                         f"(now {batch_size}) or the window length, or use the CPU.") from None
    finally:
        hook.remove()
    report(progress, "forward pass", n_windows, n_windows)
    _check_finite(states)
    return HiddenStates(states, last_prenorm, sample)


def _check_convention(model, norm, hidden: tuple[torch.Tensor, ...], captured: list[torch.Tensor],
                      entries: int) -> None:
    """The found blocks and final norm are the model's (``arch``): one hidden state per block plus the
    embedding, and the last one equal to the final norm of what that norm was given."""
    name = type(model).__name__
    require(len(hidden) == entries, f"Model {name} returned {len(hidden)} hidden states for {entries - 1} blocks; "
                                    "its blocks cannot be told apart.")
    normed = norm(captured[-1]) if captured else None
    if normed is None or not torch.allclose(normed.float(), hidden[-1].float(), rtol=1e-3, atol=1e-3):
        raise InputError(f"Model {name}'s last hidden state is not its final norm's output ({type(norm).__name__}), "
                         "so the layers cannot be read by this project's convention.")


def _check_finite(states: np.ndarray) -> None:
    bad = np.flatnonzero(~np.isfinite(states).all(axis=(1, 2)))
    if len(bad):
        raise InputError(f"The model produced NaN or Inf hidden states at layer(s) {bad.tolist()}; "
                         "try float32 (dtype) or another checkpoint.")


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of the tokenizer's full definition: checkpoints sharing a tokenizer share its cache."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(f"{text}|{bos_token(tokenizer)}".encode()).hexdigest()


def tokenised_corpus(loaded: LoadedModel, corpus: Corpus, cache: ResultCache | None = None) -> np.ndarray:
    """``[T]`` token ids of the whole corpus, cached per (tokenizer definition, text)."""
    cache = cache or default_cache()
    spec = {"tokenizer": tokenizer_fingerprint(loaded.tokenizer), "corpus": corpus.spec}
    return cache.get_or_compute("tokens", TOKENS_VERSION, spec, lambda: tokenize(loaded.tokenizer, corpus),
                                np.ndarray).value


def token_sample(loaded: LoadedModel, corpus: Corpus, sampling: Sampling,
                 cache: ResultCache | None = None) -> TokenSample:
    """The tokenised corpus and the seeded sample of positions."""
    return sample_positions(tokenised_corpus(loaded, corpus, cache), sampling, bos_token(loaded.tokenizer))


def check_run(loaded: LoadedModel, sampling: Sampling, batch_size: int) -> None:
    """InputError for a batch size below 1 or a window longer than the model's context."""
    require(isinstance(batch_size, int) and batch_size >= 1,
            f"The batch size must be a whole number of at least 1; got {batch_size!r}.")
    context = arch.context_length(loaded.model.config)
    require(context is None or sampling.window <= context,
            f"The window of {sampling.window} tokens is longer than {loaded.ref.label}'s context of {context} "
            f"positions; choose --window {context} or less.")


def hidden_states(loaded: LoadedModel, corpus: Corpus, sampling: Sampling, batch_size: int = 8,
                  progress: Progress | None = None, cache: ResultCache | None = None) -> Entry:
    """Cached :func:`extract`: the entry's value is a :class:`HiddenStates`.

    The key holds the model identity, dtype, corpus hash and sampling; not the device or batch size,
    which change the numbers only by float rounding.
    """
    check_run(loaded, sampling, batch_size)
    cache = cache or default_cache()
    return cache.get_or_compute(
        "hidden-states", HIDDEN_VERSION, states_spec(loaded.spec, corpus, sampling),
        lambda: extract(loaded, token_sample(loaded, corpus, sampling, cache), batch_size, progress), HiddenStates,
    )


def states_spec(model: dict, corpus: Corpus, sampling: Sampling) -> dict:
    """The cache key of the hidden states of ``model`` (a ``LoadedModel.spec``) on a text and sampling."""
    return {"model": model, "corpus": corpus.spec, "sampling": sampling.spec}


def stored_hidden_states(model: dict, corpus: Corpus, sampling: Sampling, cache: ResultCache) -> Entry | None:
    """The cached hidden states of ``model`` (a ``LoadedModel.spec``), or None: nothing is loaded or computed."""
    return cache.get("hidden-states", HIDDEN_VERSION, states_spec(model, corpus, sampling), HiddenStates)


def holds_hidden_states(model: dict, corpus: Corpus, sampling: Sampling, cache: ResultCache) -> bool:
    """Whether the hidden states of ``model`` are cached: the key looked up, nothing read (:func:`stored_hidden_states`
    reads every layer's states)."""
    return cache.holds("hidden-states", HIDDEN_VERSION, states_spec(model, corpus, sampling))
