"""Progress reporting: the library calls ``progress(stage, done, total)``; callers decide how to show it.

The CLI passes a tqdm adapter, the dashboard a Streamlit progress bar; the library never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Progress = Callable[[str, int, int], None]


def report(progress: Progress | None, stage: str, done: int, total: int) -> None:
    """Call ``progress`` if one was given."""
    if progress is not None:
        progress(stage, done, total)


class TimeLeft:
    """The time left in a stage at its pace since its first step was done: ``time_left(stage, done, total)`` ->
    ", about 40 s left" (empty until then, in the first second after it and at the stage's end; a new stage, or a
    count that goes back, starts the clock again). The first step is left out, being often the slowest: an exact run's
    first layer drew the null bases, 8 of its 10 s at the Pythia-1B shape's k = 1024, and "about 3 min left" stood
    where 25 s were."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.start, self.first, self.last = 0.0, 0, 0
        self.stepped = False  # the stage's first step is done: the clock runs from there

    def __call__(self, stage: str, done: int, total: int) -> str:
        return self.describe(self.seconds(stage, done, total))

    def seconds(self, stage: str, done: int, total: int) -> float | None:
        """The seconds left in ``stage`` at ``done`` of ``total`` (None where ``__call__`` says nothing)."""
        now = time.monotonic()
        if stage != self.stage or done < self.last:
            self.stage, self.start, self.first, self.last, self.stepped = stage, now, done, done, False
            return None
        if not self.stepped and done > self.first:
            self.start, self.first, self.last, self.stepped = now, done, done, True
            return None
        self.last = done
        elapsed = now - self.start
        if done <= self.first or done >= total or elapsed < 1:
            return None
        return elapsed / (done - self.first) * (total - done)

    @staticmethod
    def describe(left: float | None) -> str:
        if left is None:
            return ""
        return f", about {max(1, round(left))} s left" if left < 90 else f", about {left / 60:.0f} min left"


class TqdmProgress:
    """A ``Progress`` that draws one tqdm bar per stage on stderr."""

    def __init__(self) -> None:
        self._bars: dict = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        bar = self._bars.get(stage)
        if bar is None:
            bar = self._bars[stage] = tqdm(total=total, desc=stage, leave=True)
        bar.total = total
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()
            self._bars.pop(stage, None)


class OneBar:
    """One tqdm bar over ``total`` items (models, say); the stage inside the current item shows beside it."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.bar.set_postfix_str(f"{stage} {done}/{total}", refresh=True)

    def item(self, label: str) -> None:
        """Name the item now being worked on."""
        self.bar.set_description_str(label, refresh=True)

    def advance(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
