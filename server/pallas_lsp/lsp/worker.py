"""A single daemon thread that runs submitted callables in order.

Analysis and jedi each get one: the event loop stays free to read messages
(and cancellations) while they work, jedi (not thread-safe) is only touched
from its own thread, and a slow job never keeps the process alive at exit
(concurrent.futures' pools are joined at interpreter exit; these are not).

Jobs may carry a `key` (the document): a new job with the same key replaces
the one still waiting, in its place in the queue, and the replaced job's
future fails with `Superseded`. A job may also say it is `stale()`; it is
checked just before the job would start. Rapid edits thus leave at most one
waiting analysis per document, and none for a version already replaced.
"""
from __future__ import annotations

import collections
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, Hashable

log = logging.getLogger(__name__)


class Superseded(Exception):
    """The job was dropped before it ran: a newer one replaced it."""


class _Job:
    __slots__ = ("fut", "fn", "args", "stale", "key")

    def __init__(self, fut, fn, args, stale, key):
        self.fut, self.fn, self.args, self.stale, self.key = fut, fn, args, stale, key


class Worker:
    def __init__(self, name: str):
        self.name = name
        self._queue: collections.deque[_Job] = collections.deque()
        self._keyed: dict[Hashable, _Job] = {}  # waiting jobs by key
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self.superseded = 0  # jobs dropped without running (tests, benchmarks)

    def _ensure_started(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, key: Hashable | None = None,
               stale: Callable[[], bool] | None = None) -> Future:
        fut: Future = Future()
        dropped = None
        with self._ready:
            self._ensure_started()
            old = self._keyed.get(key) if key is not None else None
            if old is not None:  # take its place; its snapshot is released now
                dropped = old.fut
                old.fut, old.fn, old.args, old.stale = fut, fn, args, stale
            else:
                job = _Job(fut, fn, args, stale, key)
                self._queue.append(job)
                if key is not None:
                    self._keyed[key] = job
                self._ready.notify()
        if dropped is not None:
            self._drop(dropped)
        return fut

    def _drop(self, fut: Future) -> None:
        self.superseded += 1
        if fut.set_running_or_notify_cancel():
            fut.set_exception(Superseded())

    def pending(self) -> int:
        with self._ready:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                job = self._queue.popleft()
                if job.key is not None and self._keyed.get(job.key) is job:
                    del self._keyed[job.key]
            self._execute(job)
            del job  # nothing of a finished job stays alive while the worker waits

    def _execute(self, job: _Job) -> None:
        fut, fn, args, stale = job.fut, job.fn, job.args, job.stale
        job.fn = job.args = job.stale = None
        try:
            is_stale = stale is not None and stale()
        except Exception:  # noqa: BLE001 - a broken check must not stop the worker
            log.exception("stale() of a %s job failed", self.name)
            is_stale = False
        if is_stale:
            self._drop(fut)
            return
        if not fut.set_running_or_notify_cancel():
            return  # cancelled before it ran
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            fut.set_exception(exc)
