"""Daemon threads ("lanes") that run submitted callables in order.

Analysis and jedi each get a worker: the event loop stays free to read
messages (and cancellations) while they work, jedi (not thread-safe) is only
touched from its single lane, and a slow job never keeps the process alive at
exit (concurrent.futures' pools are joined at interpreter exit; these are
not). With several lanes a job waits only for a free lane, not for the jobs
before it: one file's long analysis does not hold up another file's; jobs of
one key (document) still run one at a time, in order.

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
    def __init__(self, name: str, lanes: int = 1):
        self.name = name
        self.lanes = max(1, lanes)
        self._queue: collections.deque[_Job] = collections.deque()
        self._keyed: dict[Hashable, _Job] = {}  # waiting jobs by key
        self._running: set[Hashable] = set()  # keys of the jobs running now
        self._busy = 0  # jobs running now, keyed or not
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self.superseded = 0  # jobs dropped without running (tests, benchmarks)

    def _ensure_started(self) -> None:
        while len(self._threads) < self.lanes:
            name = self.name if not self._threads else f"{self.name}-{len(self._threads) + 1}"
            thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

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
                self._ready.notify_all()
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

    def quiet(self) -> bool:
        """Nothing waiting and nothing running (tests, benchmarks)."""
        with self._ready:
            return not self._queue and not self._busy

    def _take(self) -> _Job | None:
        """The first waiting job whose key is not running (under the lock)."""
        for i, job in enumerate(self._queue):
            if job.key is None or job.key not in self._running:
                del self._queue[i]
                if job.key is not None:
                    if self._keyed.get(job.key) is job:
                        del self._keyed[job.key]
                    self._running.add(job.key)
                self._busy += 1
                return job
        return None

    def _run(self) -> None:
        while True:
            with self._ready:
                job = self._take()
                while job is None:
                    self._ready.wait()
                    job = self._take()
            key = job.key
            try:
                self._execute(job)
            finally:
                del job  # nothing of a finished job stays alive while the worker waits
                with self._ready:
                    self._busy -= 1
                    if key is not None:
                        self._running.discard(key)
                        self._ready.notify_all()  # a job of this key may wait

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
