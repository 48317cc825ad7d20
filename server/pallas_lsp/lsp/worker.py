"""A single daemon thread that runs submitted callables in order.

Analysis and jedi each get one: the event loop stays free to read messages
(and cancellations) while they work, jedi (not thread-safe) is only touched
from its own thread, and a slow job never keeps the process alive at exit
(concurrent.futures' pools are joined at interpreter exit; these are not).
"""
from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

log = logging.getLogger(__name__)


class Worker:
    def __init__(self, name: str):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        self._ensure_started()
        self._queue.put((fut, fn, args))
        return fut

    def _run(self) -> None:
        while True:
            fut, fn, args = self._queue.get()
            if not fut.set_running_or_notify_cancel():
                continue  # cancelled before it ran
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                fut.set_exception(exc)
