"""The server's admission policy: which heavy computation runs now.

Every heavy computation a visitor can cause asks here first (``Admission.hold``): model loads,
forward passes, PGA (preview, exact, fill), triage, side by side, checkpoint series, probes, the UMAP,
the capacity histogram. The rules:

- **One at a time** in this server process: two tabs do not fight for two cores.
- **By priority**, then in order of asking: ``PREVIEW`` (a chart a visitor waits for, a second or so),
  then ``PAGE`` (what a page computes while it is drawn: a load, a forward pass, a histogram, triage),
  then ``NEXT`` (what a page shows when it is ready, computed outside its run: the exact curve, the
  UMAP), then ``BACKGROUND`` (previews ahead and fill that nobody asked for yet; off in demo mode).
- **Fair shares between visitors.** Each request names its visitor (``owner``). A visitor's use of the slot is
  the seconds it held it, each counted half after ``HALF_LIFE`` seconds. Against another visitor's request, a
  request ranks by that use plus its priority's ``LEAD`` (a preview or a page's work: none; an exact curve:
  ``LEAD[NEXT]`` seconds): a visitor's preview goes before another's exact curve unless it used the slot that much
  more lately. So a visitor (or a script) asking for preview after preview no longer holds every other visitor's
  exact curves off: under contention they take turns. Against one's own work, priority alone decides, as above.
  ``BACKGROUND`` work comes after every other request, whoever asked. A request's priority may be a callable (a
  session's thread asks at the priority of the most urgent work waiting behind its current task).
- **Work nobody wants leaves.** A hold's ``leave`` is checked while its request waits and at each pause point; what
  it raises takes the request out of the queue or stops the work (a page run that a newer move superseded).
- **Pause points.** A holder calls its ``pause`` between steps (the PGA engine every few subspaces,
  each forward batch, each progress report); there it steps aside while a more urgent request waits, then
  carries on where it was. A preview therefore waits for one step of other work at most (a few
  subspaces, one forward batch, a tenth of a second of UMAP's epochs, or a whole step that has no pause points
  inside: a model load, seconds to a minute), unless its visitor has used the slot more than the holder (above). Another
  visitor's request takes the slot at a pause point only when it ranks ``SWITCH`` seconds of use ahead, so two
  visitors' long runs take turns of about a second rather than at every pause point.
- **Bounded memory.** A hold names the model it computes on; at most ``resident_models`` different
  models are in use at once (1 unless ``RG_RESIDENT_MODELS`` says otherwise). A request on another model
  waits until the work on the current one is over (the page says so), and its load then evicts it.
- **Quiet while a page is drawn** (``quiet``): the visitor's own work outside its page run (its exact curves,
  previews ahead, fill) waits, so the page and the browser have the cores; also from the moment a result the page
  shows is done until its rerun draws it. Each visitor's quiet is its own: it holds only that visitor's work (another
  visitor's browser draws on its own machine, and a stream of another visitor's page runs must not stall this
  one's exact curves), and it ends at its deadline (a page sent: a moment for the browser to draw its first chart)
  or when that visitor's own call ends it.

Nested holds in one thread are one hold (a computation may call another).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum


class Priority(IntEnum):
    PREVIEW = 0
    PAGE = 1
    NEXT = 2
    BACKGROUND = 3


HALF_LIFE = 10.0  # seconds after which a visitor's use of the slot counts half
LEAD = {Priority.PREVIEW: 0.0, Priority.PAGE: 0.0, Priority.NEXT: 3.0, Priority.BACKGROUND: 0.0}  # seconds of use
SWITCH = 0.5  # seconds of use by which another visitor's request must rank ahead to take the slot at a pause point
LEAVE_EVERY = 0.1  # seconds between a waiting request's checks that it is still wanted (``leave``)


@dataclass(eq=False)
class Request:
    asked: Priority | Callable[[], Priority]  # a priority, or what it is now (work others wait for behind it)
    number: int
    name: str
    model: str | None = None
    owner: object = None  # the visitor whose work it is (whose quiet holds it, whose use of the slot it adds to)
    leave: Callable[[], None] | None = None  # raises when the work is no longer wanted (checked while it waits)

    @property
    def priority(self) -> Priority:
        return self.asked() if callable(self.asked) else self.asked


class Admission:
    """The policy's state: who holds the server's one computation slot, who waits, which models are in use."""

    def __init__(self, resident_models: int = 1) -> None:
        self.resident_models = resident_models
        self.condition = threading.Condition()
        self.holder: tuple[int, Request] | None = None  # (thread id, request)
        self.since = 0.0  # when the holder took the slot
        self.used: dict[object, tuple[float, float]] = {}  # owner -> (seconds of use, when counted)
        self.clock = time.monotonic()  # the time requests are ranked at: one for all waiters between two changes
        self.waiting: list[Request] = []
        self.models: Counter[str] = Counter()  # model -> holds on it, paused ones included
        self.quiet_until: dict[object, float] = {}  # owner (a visitor's session) -> end of its quiet
        self.numbers = itertools.count()
        self.loaded: dict[str, str] = {}  # identity -> label of the models in memory, least recently used first

    def resident(self, identity: str, label: str) -> list[str]:
        """Note that ``identity`` is in memory (used now); the labels of the models this pushed out."""
        with self.condition:
            self.loaded.pop(identity, None)
            self.loaded[identity] = label
            released = []
            while len(self.loaded) > self.resident_models:
                released.append(self.loaded.pop(next(iter(self.loaded))))
            return released

    def _fits(self, request: Request) -> bool:
        """The request's model is in use already, or one more model stays within the bound."""
        return request.model is None or request.model in self.models or len(self.models) < self.resident_models

    def _quiet_left(self, request: Request) -> float:
        """Seconds the quiet of the request's owner holds it (a preview or a page's own work: none)."""
        if request.priority <= Priority.PAGE or request.owner not in self.quiet_until:
            return 0.0
        return max(0.0, self.quiet_until[request.owner] - time.monotonic())

    def _use(self, owner: object, now: float) -> float:
        """``owner``'s use of the slot at ``now``: seconds held, each halved every ``HALF_LIFE`` since (the
        holder's current hold in full)."""
        seconds, when = self.used.get(owner, (0.0, now))
        use = seconds * 0.5 ** ((now - when) / HALF_LIFE)
        if self.holder is not None and self.holder[1].owner == owner:
            use += max(0.0, now - self.since)
        return use

    def _rank(self, request: Request, now: float) -> tuple:
        """The request's place in the queue (lowest first): background last; then its owner's use plus its
        priority's lead; then priority and order of asking (one owner's requests: by priority alone)."""
        return (request.priority == Priority.BACKGROUND, self._use(request.owner, now) + LEAD[request.priority],
                request.priority, request.number)

    def _ahead(self, waiting: Request, holder: Request, now: float) -> bool:
        """Whether ``waiting`` takes the slot from ``holder`` at its pause point (another owner's: by ``SWITCH``)."""
        first, second = self._rank(waiting, now), self._rank(holder, now)
        if waiting.owner != holder.owner and first[0] == second[0]:
            return first[1] + SWITCH < second[1]
        return first < second

    def _next(self) -> Request | None:
        admissible = [r for r in self.waiting if self._fits(r) and not self._quiet_left(r)]
        return min(admissible, key=lambda r: self._rank(r, self.clock), default=None)

    def _take(self, request: Request, counted: bool) -> None:
        with self.condition:
            self.waiting.append(request)
            self.clock = time.monotonic()
            self.condition.notify_all()  # a holder's pause, and anyone watching, sees the request
            try:
                while self.holder is not None or self._next() is not request:
                    if request.leave is not None:
                        request.leave()
                    waits = (self._quiet_left(request), LEAVE_EVERY if request.leave else 0.0)
                    self.condition.wait(timeout=min((t for t in waits if t), default=None))
            finally:
                self.waiting.remove(request)
                self.condition.notify_all()  # one that left: the others rank without it
            self.holder, self.since = (threading.get_ident(), request), time.monotonic()
            if request.model is not None and not counted:
                self.models[request.model] += 1

    def _give_back(self, request: Request, release_model: bool) -> None:
        """The slot back from ``request``, its use counted (where it holds it: one that left the queue at a pause
        does not); with ``release_model``, its model out of use."""
        with self.condition:
            if self.holder is not None and self.holder[1] is request:
                self.clock = now = time.monotonic()
                use = self._use(request.owner, now)
                self.used = {o: counted for o, counted in self.used.items() if self._use(o, now) > 0.01}
                self.used[request.owner] = (use, now)
                self.holder = None
            if release_model and request.model is not None:
                self.models[request.model] -= 1
                if not self.models[request.model]:
                    del self.models[request.model]
            self.condition.notify_all()

    def _pause(self, request: Request) -> None:
        if request.leave is not None:
            request.leave()
        with self.condition:
            self.clock = now = time.monotonic()
            waiting = self._next()
            urgent = (waiting is not None and self._ahead(waiting, request, now)) or self._quiet_left(request)
        if urgent:
            self._give_back(request, release_model=False)  # still computing on its model: it stays in use
            self._take(request, counted=True)

    def contended(self, model: str | None) -> bool:
        """A request on another model waits, or ``model`` is no longer in memory: background work on ``model``
        should give way rather than pause (it would hold its model in memory and make the request wait)."""
        with self.condition:
            return (any(r.model not in (None, model) for r in self.waiting)
                    or (model is not None and bool(self.loaded) and model not in self.loaded))

    def reconsider(self) -> None:
        """A waiting request's priority (one given as a callable) may have changed: rank the waiting ones again."""
        with self.condition:
            self.clock = time.monotonic()
            self.condition.notify_all()

    def waits(self, priority: Priority, model: str | None = None) -> str | None:
        """Why a request would wait now (None: it would run at once)."""
        with self.condition:
            if self.holder is not None and self.holder[0] == threading.get_ident():
                return None
            if model is not None and not self._fits(Request(priority, -1, "", model)):
                return (f"this server keeps {self.resident_models} model(s) in memory and another visitor's "
                        f"computation on {', '.join(self.models)} is running")
            if self.holder is not None:
                return f"another computation ({self.holder[1].name}) is running; one runs at a time"
            return None

    @contextlib.contextmanager
    def hold(self, priority: Priority | Callable[[], Priority], name: str, model: str | None = None,
             owner: object = None, leave: Callable[[], None] | None = None):
        """Hold the slot for ``name`` at ``priority`` (or at what the callable says each time it is ranked: call
        :meth:`reconsider` when it changes), on ``model`` (an identity), for ``owner`` (the visitor whose quiet holds
        it and whose use of the slot it adds to); the value is the holder's ``pause()``. ``leave`` is called while
        the request waits (every ``LEAVE_EVERY`` seconds) and at each pause: what it raises (a page run that a newer
        move superseded) takes the request out of the queue, or stops the work. Nested in a hold of the same thread:
        that hold's pause."""
        if self.holder is not None and self.holder[0] == threading.get_ident():
            outer = self.holder[1]
            yield lambda: self._pause(outer)
            return
        request = Request(priority, next(self.numbers), name, model, owner, leave)
        self._take(request, counted=False)
        try:
            yield lambda: self._pause(request)
        finally:
            self._give_back(request, release_model=True)

    def quiet(self, seconds: float, owner: object = None, extend: bool = False) -> None:
        """``owner``'s (a visitor's session) work outside its page run waits for the next ``seconds`` from now: its
        later call shortens or extends its own quiet (0 ends it), never another owner's; with ``extend``, it only
        extends it (a page run's longer quiet stands)."""
        with self.condition:
            now = time.monotonic()
            until = max(now + seconds, self.quiet_until.get(owner, now)) if extend else now + seconds
            self.quiet_until = {o: end for o, end in self.quiet_until.items() if end > now and o != owner}
            if until > now:
                self.quiet_until[owner] = until
            self.clock = now
            self.condition.notify_all()
