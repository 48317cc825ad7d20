"""Per-key debounce on the asyncio loop: scheduling a key again before its
delay has passed replaces the pending call."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)


class Debouncer:
    def __init__(self) -> None:
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: dict[str, asyncio.Task] = {}

    def schedule(self, key: str, delay_s: float, fn: Callable[[], Awaitable[Any]]) -> None:
        self.cancel_timer(key)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(0.0, delay_s), self._fire, key, fn)

    def _fire(self, key: str, fn: Callable[[], Awaitable[Any]]) -> None:
        self._timers.pop(key, None)
        task = asyncio.ensure_future(fn())
        self._tasks[key] = task
        task.add_done_callback(lambda t, key=key: self._done(key, t))

    def _done(self, key: str, task: asyncio.Task) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("debounced job for %s failed", key, exc_info=task.exception())

    def cancel_timer(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def cancel(self, key: str) -> None:
        """Drop the pending call and stop a running one."""
        self.cancel_timer(key)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def pending(self) -> int:
        return len(self._timers) + len(self._tasks)
