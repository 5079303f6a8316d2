"""Work a page starts and does not wait for, done outside the visitor's script run.

A page draws what it has (a preview, the stored numbers), hands the rest to its session's :class:`Background`
as :class:`Task` s and ends: the browser's Running indicator stops when the visible part is drawn. One thread
per session runs the tasks in order, each through the server's admission policy; a newer page run that no
longer asks for a task stops it at its next pause point, or while it waits for the slot there (finished layers
stay in the disk cache), and one that asks for more urgent work first (a move's exact curve before the
previews around it) puts it back in line there; a closed tab's work waits there until its visitor is back (a
reconnected tab resumes it). :func:`show_status` draws one quiet line of what is ready, refreshed while work
runs, and reruns the page as soon as a task whose result the page shows is done (and every few seconds while a long
one's layers come in, where the page draws them).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
import torch

from analysis.errors import InputError
from analysis.progress import Progress, TimeLeft
from dashboard.admission import Admission, Priority
from dashboard.text import literal

# The status line's refresh. Each is a run of the page's fragment, which the browser answers by drawing the page
# again: about 0.07 core-s in the server and 0.075 in chromium a second on 2 cores (every half second made a move's
# exact run 1.1-1.5x as long as the same sweep outside the app, BENCHMARKS.md).
REFRESH_SECONDS = 1.0
# While a result the page shows is computed, the first refresh comes this soon and waits in its run for it (below):
# one refresh a second put the exact curve up to a second after it was done (0.5 s a move where the exact run after
# a preview took half a second). The refreshes due while it waits are not run (Streamlit queues a fragment's timed
# reruns behind its running one, and the page's rerun replaces them).
FIRST_REFRESH_SECONDS = 0.2
# While a result the page shows is computed, a refresh stays in its fragment run until the result is done (the page is
# rerun at once) and looks this often for it and for a visitor's newer move (reading the session state is where
# Streamlit stops a script run for a newer one); the line is redrawn once a refresh period, only when it changed.
# Since the first refresh comes in FIRST_REFRESH_SECONDS, a move right after a preview usually finds one waiting: a
# look every 0.05 s keeps the old chart from lingering (a browser test saw it stay past 0.15 s once under load).
POLL_SECONDS = 0.05
# A result the page shows is done: the session's other work waits this long at most for the page's rerun, which then
# holds the cores while it draws it (its own quiet replaces this one). Taken after the slot was free, a preview ahead
# ran beside that rerun until its first pause point.
RERUN_SECONDS = 1.0
# A task whose finished layers the page draws (``Task.shows_layers``: an exact curve of 25-35 s at the Pythia-1B
# shape, whose preview showed three layers meanwhile) reruns the page this often at most, while at least as long is
# left: each rerun held the run off for about half a second.
LAYERS_SECONDS = 6.0


class Superseded(Exception):
    """A newer page run no longer asks for this task, or (background work) another model is wanted."""


class Absent(Exception):
    """The visitor's browser is gone (a closed tab, a lost connection): the task waits for the visitor's return."""


class Preempted(Exception):
    """A newer page run asks for more urgent work first (its exact curve before the previews around it): this task
    waits its turn again."""


@dataclass(eq=False)
class Task:
    """One piece of work: ``run(progress, slot)`` computes into the caches (``slot``: the library's pause
    points); ``group`` and ``key`` name it in the status line; ``scope`` is everything else its result
    depends on (model, text, sampling, seed); ``shows`` marks a result the page draws when it is done,
    ``shows_layers`` one it also draws as its layers come in (``LAYERS_SECONDS``)."""

    key: str
    group: str
    priority: Priority
    run: Callable[[Progress, Callable], object] | None
    model: str | None = None
    scope: str = ""
    shows: bool = False
    shows_layers: bool = False
    state: str = "waiting"  # waiting | running | done | failed | stopped
    stage: str = ""
    done: int = 0
    total: int = 0
    seconds_left: float | None = None  # in the running stage, where known (``analysis.progress.TimeLeft``)
    error: str = ""
    rerun: bool = False  # a "shows" task done: the page has been rerun to draw it (once)
    drawn: tuple[str, int, float] = ("", 0, 0.0)  # a "shows_layers" task's stage, count done and time when last drawn

    @property
    def left(self) -> str:
        """", about 40 s left" where the time left in the running stage is known, else empty."""
        return TimeLeft.describe(self.seconds_left)

    @property
    def identity(self) -> tuple[str, str, str]:
        return self.scope, self.group, self.key

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "stopped")


class Background:
    """A session's background tasks and the thread that runs them, one at a time, in order."""

    def __init__(self, admission: Admission, owner: object = None, present: Callable[[], bool] = lambda: True) -> None:
        self.admission = admission
        self.owner = owner  # the session: its quiet holds this work; a result it shows starts one (RERUN_SECONDS)
        self.present = present  # whether the session's browser is still connected: work for nobody stops
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # notified when a task ends
        self.tasks: list[Task] = []
        self.thread: threading.Thread | None = None

    def replace(self, tasks: list[Task]) -> None:
        """Run ``tasks`` from now on: one this session asked for already keeps its progress (it is not
        restarted, and one that failed is not tried again); one no longer asked for stops at its next pause."""
        with self.lock:
            kept = {task.identity: task for task in self.tasks if task.state != "stopped"}
            self.tasks = [kept.get(task.identity, task) for task in tasks]
        self.admission.reconsider()  # the thread's request, if it waits, asks at the new list's priority
        self.resume()

    def resume(self) -> None:
        """Start the thread where tasks wait and none runs them (a new list, or a visitor back after its thread
        stopped for its absence)."""
        with self.lock:
            if self.thread is None and any(not task.finished for task in self.tasks):
                self.thread = threading.Thread(target=self._work, name="background", daemon=True)
                self.thread.start()

    def wanted(self, task: Task) -> bool:
        with self.lock:
            return task in self.tasks

    def _next(self) -> Task | None:
        """The first waiting task while the visitor is there; else None, and the thread is over (decided under the
        lock that :meth:`resume` takes, so that a list arriving as the thread ends starts a new one)."""
        with self.lock:
            task = next((task for task in self.tasks if task.state == "waiting"), None) if self.present() else None
            if task is None:
                self.thread = None
            return task

    def _preempted(self, task: Task) -> bool:
        """A more urgent task waits before ``task`` in the list: a move asked for its exact curve while a preview or
        fill that it still wants runs (the list's order is the order of work, so that one runs next)."""
        with self.lock:
            before = self.tasks[:self.tasks.index(task)] if task in self.tasks else []
            return any(other.state == "waiting" and other.priority < task.priority for other in before)

    def _asking(self, task: Task) -> Priority:
        """The priority ``task`` asks for the slot at: its own, or that of a more urgent task waiting in the list,
        which this thread runs only after it (a preview ahead before an exact curve asks as the exact curve would;
        a task the list no longer wants, as the list's most urgent one, which it gives way to once it holds)."""
        with self.lock:
            return min([task.priority] + [other.priority for other in self.tasks if other.state == "waiting"])

    def _work(self) -> None:
        """Run the tasks in order while the visitor is there (a closed tab leaves them waiting, for :meth:`resume`)."""
        while (task := self._next()) is not None:
            self._run(task)

    def _run(self, task: Task) -> None:
        def leave() -> None:
            """Raises where ``task`` should stop: checked at each pause point and while it waits for the slot there,
            so that work a page run no longer wants leaves as soon as that run has replaced the list (checked only
            before each pause, it ran one more step, up to 0.4 s at d = 2048, beside the browser drawing the page)."""
            if not self.present():
                raise Absent
            if not self.wanted(task) or (task.priority == Priority.BACKGROUND
                                         and self.admission.contended(task.model)):
                raise Superseded
            if self._preempted(task):
                raise Preempted

        task.state, task.drawn = "running", ("", 0, time.monotonic())  # the page has just drawn what it had
        try:
            with self.admission.hold(lambda: self._asking(task), task.group, task.model, self.owner,
                                     leave) as step:
                time_left = TimeLeft()

                def progress(stage: str, done: int, total: int) -> None:
                    task.stage, task.done, task.total = stage, done, total
                    task.seconds_left = time_left.seconds(stage, done, total)
                    step()

                step()
                task.run(progress, lambda: contextlib.nullcontext(step))
                if task.shows:  # quiet from before the slot is free: the page's rerun to draw it comes first
                    self.admission.quiet(RERUN_SECONDS, self.owner, extend=True)
            task.state = "done"
        except (Preempted, Absent):
            task.state = "waiting"  # to run again (a preview from the start, other work from its first missing layer)
        except Superseded:
            task.state = "stopped"
        except (InputError, MemoryError, RuntimeError, torch.OutOfMemoryError) as error:
            task.state, task.error = "failed", str(error)
        finally:
            if task.state != "waiting":
                task.run = None  # release what the work held (hidden states, the model)
            with self.changed:
                self.changed.notify_all()

    def idle(self) -> bool:
        with self.lock:
            return all(task.finished for task in self.tasks)

    def join(self, timeout: float | None = None) -> None:
        """Wait until the thread has run every task (the tests do, as the status line's rerun would)."""
        thread = self.thread
        if thread is not None:
            thread.join(timeout)

    def line(self) -> str:
        """What is ready, one short clause per group: "Exact curve: layer 19/31 · Previews ahead: 6/14 ready", with
        the running task's steps where the page shows its result: "Probes: 0/2 ready (64 texts first, pooled states:
        16/64, about 20 s left)"."""
        with self.lock:
            groups: dict[str, list[Task]] = {}
            for task in self.tasks:
                groups.setdefault(task.group, []).append(task)
        parts = []  # what the page shows next first, then the background's groups
        for group, tasks in sorted(groups.items(), key=lambda item: min(task.priority for task in item[1])):
            running = next((task for task in tasks if task.state == "running"), None)
            if len(tasks) == 1 and running is not None and running.total:
                parts.append(f"{group} ({running.stage}): {running.done}/{running.total}{running.left}")
            elif len(tasks) == 1:
                parts.append(f"{group}: {'ready' if tasks[0].state == 'done' else tasks[0].state}")
            else:
                ready = f"{group}: {sum(task.state == 'done' for task in tasks)}/{len(tasks)} ready"
                if running is not None and running.shows and running.total:  # what the page waits for, said
                    ready += f" ({running.key}, {running.stage}: {running.done}/{running.total}{running.left})"
                parts.append(ready)
        return " · ".join(parts)

    def _showing(self) -> bool:  # the lock held
        return any(task.shows and not task.finished for task in self.tasks)

    def showing(self) -> bool:
        """A task whose result the page shows is to run, runs, or waits for the cores."""
        with self.lock:
            return self._showing()

    def wait_shown(self, timeout: float) -> None:
        """Wait until no task whose result the page shows runs, ``timeout`` seconds at most."""
        with self.changed:
            self.changed.wait_for(lambda: not self._showing(), timeout)

    def to_draw(self) -> bool:
        """A task the page asked for because it shows its result is done: the page should rerun (once per
        task; the page asks again only while the result is missing)."""
        with self.lock:
            ready = [task for task in self.tasks if task.shows and task.state == "done" and not task.rerun]
            for task in ready:
                task.rerun = True
            return bool(ready)

    def to_draw_layers(self) -> bool:
        """A running task whose finished layers the page draws (``shows_layers``) has done more since the page drew
        them, ``LAYERS_SECONDS`` or more ago, and has at least as long left: the page should rerun to draw them."""
        now = time.monotonic()
        with self.lock:
            due = [task for task in self.tasks if task.shows_layers and task.state == "running"
                   and (task.stage, task.done) != task.drawn[:2] and now - task.drawn[2] >= LAYERS_SECONDS
                   and (task.seconds_left or 0.0) >= LAYERS_SECONDS]
            for task in due:
                task.drawn = (task.stage, task.done, now)
            return bool(due)

    def failures(self) -> list[Task]:
        with self.lock:
            return [task for task in self.tasks if task.state == "failed"]


def show_status(background: Background) -> None:
    """One quiet line of what is ready, refreshed while anything runs; failures as one warning each; the page
    reruns when a result it shows is done. While such a result is computed, a refresh waits in its run for it
    (``POLL_SECONDS``) and reruns the page the moment it is done: chromium then spent about 0.05 of a core beside the
    exact run, against 0.1-0.3 for a fragment run every second. Once nothing runs, the page reruns once more and the
    line stops refreshing (an open page costs no CPU, the visitor's or the server's)."""
    refreshes = itertools.count()

    def status() -> None:
        refresh = next(refreshes) > 0  # not the page run's own call
        background.resume()  # the visitor is here: work its thread left when the tab lost its connection goes on
        for task in background.failures():
            st.warning(literal(f"{task.group} ({task.key}) stopped: {task.error}"), icon=":material/warning:")
        line, drawn, drawn_at = st.empty(), None, 0.0
        while refresh and background.showing():
            if (text := background.line()) != drawn and time.monotonic() - drawn_at >= REFRESH_SECONDS:
                line.caption(literal(text))
                drawn, drawn_at = text, time.monotonic()
            background.wait_shown(POLL_SECONDS)
            _ = "background" in st.session_state  # where Streamlit stops this run for a visitor's newer one
            if background.to_draw() or background.to_draw_layers():  # one result of several, or layers of one
                st.rerun(scope="app")
        if background.to_draw() or (refresh and background.idle()):
            st.rerun(scope="app")
        if text := background.line():
            line.caption(literal(text))

    every = None if background.idle() else FIRST_REFRESH_SECONDS if background.showing() else REFRESH_SECONDS
    st.fragment(status, run_every=every)()
