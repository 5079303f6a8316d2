"""Where the first answer's time goes: each part of Triage's verdict and of the capacity page, in the order the
dashboard computes them, from an empty results cache with the model fetched; one run.

Parts: the card (configuration only), loading the weights, tokenising the text, the forward pass, each layer's
PCA, the z preview (PCAs remembered; not on a GPU, where the app skips it), the exact CCR-1 sweep over every layer,
CCR-5 at the worst late layer, epsilon's statistics (reading W_E, the closed form), the capacity page's preview
histogram and its histogram of all pairs. Then the first answer as a visitor meets it: the first z curve and the
verdict, seconds from the start, and the process's peak memory.
``--shape pythia-410m`` or ``pythia-1b`` first saves a random model of that shape (GPT-NeoX, vocabulary 50,304,
untied; speed does not depend on the weights) with ``save_pretrained`` and times that.
Usage: python bench/first_answer.py [--model smollm2-135m | --shape pythia-410m] [--n 512]
"""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# isort: off
import analysis  # noqa: E402, F401  (first: its OpenMP setting must precede torch, as in the app)
# isort: on
from gpu import SHAPES, build_model  # noqa: E402

from analysis.activations.hidden import token_sample  # noqa: E402
from analysis.capacity.epsilon import cosine_histogram, rows_histogram  # noqa: E402
from analysis.data.corpus import Sampling, builtin_corpus  # noqa: E402
from analysis.geometry.verdict import worst_late_layer  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from analysis.models.tiny import train_tokenizer  # noqa: E402
from analysis.models.weights import read_matrix  # noqa: E402
from analysis.runs import analyses  # noqa: E402
from analysis.runs.pipeline import matrix_stats  # noqa: E402
from analysis.runs.settings import (  # noqa: E402
    TRIAGE_DEEPER_CCR,
    Compute,
    ModelChoice,
    needs_preview,
    pga_settings,
    preview_settings,
)
from analysis.storage.cache import default_cache  # noqa: E402
from analysis.storage.memory import EngineMemory  # noqa: E402
from analysis.storage.paths import models_dir  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--shape", choices=sorted(SHAPES))
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    print(cpu_description())  # as on an AVX2 laptop: python bench/laptop.py bench/<this script>
    model = args.model
    if args.shape:
        model = str(Path(tempfile.mkdtemp()) / args.shape)
        start = time.perf_counter()
        build_model(args.shape, Path(model), train_tokenizer(builtin_corpus().text, vocab_size=512))
        print(f"saved a random {args.shape}-shaped model in {time.perf_counter() - start:.1f} s (not timed below)")
    os.environ.setdefault("RG_MODELS_DIR", str(models_dir()))  # the fetched model stays where it is
    os.environ["RG_CACHE_DIR"] = tempfile.mkdtemp()  # every part, the layers' PCAs included, starts from nothing
    cache, memory, compute = default_cache(), EngineMemory(), Compute(device=args.device)
    corpus, sampling = builtin_corpus(), Sampling(n_tokens=args.n)
    parts: dict[str, float] = {}
    clock = time.perf_counter()

    def timed(name: str, work):
        start = time.perf_counter()
        result = work()
        parts[name] = time.perf_counter() - start
        return result

    choice = ModelChoice(model)
    card = timed("card (configuration only)", lambda: analyses.model_card(choice))
    loaded = timed("load the weights", lambda: analyses.open_model(choice, compute))
    timed("tokenise the text", lambda: token_sample(loaded, corpus, sampling, cache))
    states = timed(f"forward pass ({sampling.n_tokens} positions)",
                   lambda: analyses.model_hidden_states(loaded, corpus, sampling, compute, cache=cache))
    settings = pga_settings(loaded.anatomy.d_model, seed=sampling.seed)
    timed("PCA of every layer", lambda: analyses.warm_pga(loaded, corpus, sampling, settings, compute, states=states,
                                                           memory=memory))
    previewed = needs_preview(compute.device)  # on a GPU the app draws the exact curve first
    if previewed:
        timed("z preview (PCAs remembered)", lambda: analyses.model_pga(
            loaded, corpus, sampling, preview_settings(settings, loaded.anatomy.d_model), compute=compute, cache=cache,
            states=states, memory=memory))
    preview_at = time.perf_counter() - clock
    run = timed("exact sweep, CCR-1, every layer", lambda: analyses.model_pga(
        loaded, corpus, sampling, settings, compute=compute, cache=cache, states=states, memory=memory))
    first_curve_at = preview_at if previewed else time.perf_counter() - clock
    worst = worst_late_layer(run.at())
    deeper = pga_settings(loaded.anatomy.d_model, settings.ks, (TRIAGE_DEEPER_CCR,), seed=sampling.seed)
    if worst is not None:
        timed(f"CCR-{TRIAGE_DEEPER_CCR} at the worst late layer", lambda: analyses.model_pga(
            loaded, corpus, sampling, deeper, [worst.layer], compute, cache=cache, states=states, memory=memory))
    timed("epsilon statistics (read W_E, closed form)", lambda: matrix_stats(loaded.ref, "embedding",
                                                                             compute.device, cache))
    verdict_at = time.perf_counter() - clock
    matrix = read_matrix(loaded.ref, "embedding").matrix
    timed("capacity page: preview histogram (2,048 rows)", lambda: rows_histogram(matrix, device=compute.device))
    timed("capacity page: histogram of all pairs", lambda: cosine_histogram(matrix, device=compute.device))

    print(f"{card['name']}: {card['n_layers']} blocks, d_model {card['d_model']}, vocabulary {card['vocab_size']:,}, "
          f"{'tied' if card['tied_embeddings'] else 'untied'}; N = {sampling.n_tokens}, k = {settings.ks[0]}, "
          f"R = {settings.n_null}, dtype {loaded.spec['dtype']}, device {loaded.device}")
    width = max(map(len, parts))
    for name, seconds in parts.items():
        print(f"  {name:<{width}} {seconds:7.2f} s")
    print(f"first answer: first z curve drawn at {first_curve_at:.1f} s, full verdict at {verdict_at:.1f} s "
          "(card, load, tokenise, forward, PCA, preview (on a GPU the exact curve); then exact, deeper CCR, epsilon)")
    print(f"peak memory (resident set) {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
