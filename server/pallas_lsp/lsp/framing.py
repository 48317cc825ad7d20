"""Reading LSP messages from a byte stream without trusting the sender.

pygls' reader only accepts headers spelled exactly `Content-Length: N\\r\\n`,
allocates whatever length it is told (a `Content-Length` of 10^12 raises
MemoryError and ends the server) and never finds its way back once a length
is wrong: the rest of the previous body is glued to the next header, so every
later message is lost. This reader:

* accepts header names in any case, LF-only line ends and spaces around `:`;
* caps a message's size: a larger one is skipped without being buffered
  (answered with an error when its id can be seen in its first bytes);
* resynchronises on the next `Content-Length` header after garbage, a body
  shorter than announced or one longer than announced (JSON cannot contain a
  raw line break inside a string, so `Content-Length: N<LF>` never occurs
  inside a valid body);
* keeps its read-ahead bounded.

`serve()` is the main loop used for stdio and TCP (see server.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)

MAX_MESSAGE_ENV = "PALLAS_LSP_MAX_MESSAGE_BYTES"  # developer hook (tests)
DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024
MAX_HEADER_LINE = 8192  # a header line longer than this is garbage
CHUNK = 65536
IDLE_S = 1.0  # no data for this long while a body is incomplete: check for a too-long length

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)
_HEADER_NAME = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_FIELD = re.compile(rb"^[ \t]*([A-Za-z0-9!#$%&'*+.^_`|~-]+)[ \t]*:[ \t]*(.*?)[ \t]*$")
# the top-level "id" of a request, among the scalar members before the first
# nested one (clients write "jsonrpc", "id", "method" before "params")
_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null)'
_LEADING = re.compile(rb'^\s*\{((?:\s*"(?:[^"\\]|\\.)*"\s*:\s*' + _SCALAR + rb'\s*,)*)')
_MEMBER = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*(' + _SCALAR + rb')')


def max_message_bytes() -> int:
    try:
        value = int(os.environ.get(MAX_MESSAGE_ENV, ""))
        return value if value > 0 else DEFAULT_MAX_MESSAGE
    except ValueError:
        return DEFAULT_MAX_MESSAGE


def request_id(prefix: bytes) -> Any:
    """The id of a request whose (possibly truncated) JSON starts with
    `prefix`, when "id" and "method" are among its leading scalar members;
    else None (a notification, a response, or nothing recognisable)."""
    m = _LEADING.match(prefix + b",")  # the last scalar member may end the prefix
    if m is None:
        return None
    members = {}
    for name, value in _MEMBER.findall(m.group(1)):
        members.setdefault(name, value)
    if b"method" not in members or b"id" not in members:
        return None
    try:
        value = json.loads(members[b"id"])
    except ValueError:
        return None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


class ChunkSource:
    """Chunks from a blocking binary stream (stdin), read on a daemon thread
    at most `ahead` chunks ahead of the consumer. `read()` is safe to cancel:
    no chunk is lost."""

    def __init__(self, stream, ahead: int = 16):
        self._read1 = getattr(stream, "read1", None) or stream.read
        self._queue: asyncio.Queue | None = None
        self._room = threading.Semaphore(ahead)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        threading.Thread(target=self._pump, name="pallas-lsp-stdin", daemon=True).start()

    def _pump(self) -> None:
        assert self._loop is not None and self._queue is not None
        while True:
            self._room.acquire()
            try:
                data = self._read1(CHUNK)
            except (OSError, ValueError):
                data = b""
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, data or b"")
            except RuntimeError:  # the loop is closed
                return
            if not data:
                return

    async def read(self) -> bytes:
        if self._queue is None:
            self._start()
        assert self._queue is not None
        data = await self._queue.get()
        self._room.release()
        return data


class MessageReader:
    """Splits a byte stream into message bodies. `next()` returns one body
    (bytes, maybe not valid JSON) or None at the end of the stream; problems
    go to `on_problem(message, request_id_or_None, code)`."""

    def __init__(self, read: Callable[[], Awaitable[bytes]],
                 on_problem: Callable[[str, Any, int], None] | None = None,
                 max_body: int | None = None, idle_s: float = IDLE_S):
        self._read = read
        self._on_problem = on_problem or (lambda message, msg_id, code: None)
        self.max_body = max_body or max_message_bytes()
        self.idle_s = idle_s
        self.buf = bytearray()
        self._pending: asyncio.Future | None = None
        self._eof = False
        self._skipped = 0  # bytes of garbage dropped since the last good header

    # ------------------------------------------------------------ input

    async def _fill(self, timeout: float | None = None) -> bool | None:
        """Read one more chunk: True, False when `timeout` passed first, None
        at the end of the stream."""
        if self._eof:
            return None
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._read())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return False
        fut, self._pending = self._pending, None
        try:
            data = fut.result()
        except Exception as exc:  # a broken transport is the end of the stream
            log.info("reading the client's messages failed: %s", exc)
            data = b""
        if not data:
            self._eof = True
            return None
        self.buf += data
        return True

    def problem(self, message: str, msg_id: Any = None, code: int = PARSE_ERROR) -> None:
        log.warning("%s", message)
        try:
            self._on_problem(message, msg_id, code)
        except Exception:
            log.exception("reporting a framing problem failed")

    def _garbage(self, n: int) -> None:
        self._skipped += n

    def _report_garbage(self) -> None:
        if self._skipped:
            self.problem(f"skipped {self._skipped} bytes that were not part of a message "
                         "(no valid Content-Length header before them)")
            self._skipped = 0

    # ------------------------------------------------------------ headers

    async def _line(self) -> bytes | None:
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self.buf) > MAX_HEADER_LINE:
                m = _HEADER_NAME.search(self.buf)
                if m is not None and m.start() > 0:
                    self._garbage(m.start())
                    del self.buf[:m.start()]
                elif m is None:  # keep a tail that may be the start of a header
                    drop = len(self.buf) - 32
                    self._garbage(drop)
                    del self.buf[:drop]
                if len(self.buf) > MAX_HEADER_LINE:  # a header name followed by junk
                    self._garbage(len(self.buf))
                    self.buf.clear()
            if await self._fill() is None:
                if self.buf:
                    self._garbage(len(self.buf))
                    self.buf.clear()
                return None

    async def _headers(self) -> int | None:
        """Read a header block; its Content-Length, or None at the end."""
        length: int | None = None
        while True:
            line = await self._line()
            if line is None:
                self._report_garbage()
                return None
            if not line.strip():
                if length is not None:
                    self._report_garbage()
                    return length
                continue
            found = _HEADER_NAME.search(line, 1)
            if found is not None:  # the end of a broken body, then a header
                self._garbage(found.start())
                line = line[found.start():]
                length = None
            m = _FIELD.match(line)
            if m is None:
                self._garbage(len(line) + 1)
                length = None  # a header seen before this junk belonged to it
            elif m.group(1).lower() == b"content-length":
                if m.group(2).isdigit():
                    length = int(m.group(2))
                else:
                    self.problem(f"invalid Content-Length header {line[:80]!r}: "
                                 "skipping to the next message")
                    length = None
            # other headers (Content-Type) are not needed

    # ------------------------------------------------------------ bodies

    async def next(self) -> bytes | None:
        while True:
            length = await self._headers()
            if length is None:
                return None
            if length > self.max_body:
                await self._skip_oversized(length)
                continue
            return await self._body(length)

    async def _body(self, length: int) -> bytes:
        while len(self.buf) < length:
            got = await self._fill(timeout=self.idle_s if self.buf else None)
            if got is None:  # the stream ended inside the body
                break
            if got is False:
                short = self._complete_prefix()
                if short is not None:
                    self.problem(f"a message announced {length} bytes but was {short} bytes "
                                 "long; read it as sent")
                    body = bytes(self.buf[:short])
                    del self.buf[:short]
                    return body
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return body

    def _complete_prefix(self) -> int | None:
        """Length of a complete JSON value at the start of the buffer (the
        whole buffer, give or take whitespace), else None."""
        data = bytes(self.buf)
        if _is_json(data):
            return len(data)
        return _json_before_header(data)

    def recover(self, body: bytes) -> bytes | None:
        """`body` does not parse. If a header starts inside it (the length
        was too long), give the bytes from that header back to the stream and
        return what came before it (the message, maybe); else None."""
        # The body may end inside the next header ("Content-Length: 5" and no
        # line break yet): a header name right after a complete JSON value is
        # enough; otherwise only a whole header line counts.
        at = _json_before_header(body)
        if at is None:
            m = _HEADER.search(body)
            at = m.start() if m is not None else None
        return self._give_back(body, at) if at is not None else None

    def _give_back(self, body: bytes, at: int) -> bytes:
        self.buf[:0] = body[at:]
        return body[:at]

    async def _skip_oversized(self, length: int) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + 0.2
        while len(self.buf) < 512 and loop.time() < until:  # enough to see the request's id
            if not await self._fill(timeout=max(0.0, until - loop.time())):
                break
        msg_id = request_id(bytes(self.buf[:4096]))
        self.problem(f"a message of {length} bytes is larger than the limit of {self.max_body} "
                     "bytes: skipped", msg_id, INVALID_REQUEST)
        remaining = length
        while True:
            m = _HEADER.search(self.buf)
            if m is not None and m.start() <= remaining:  # resynchronised on the next header
                del self.buf[:m.start()]
                return
            if len(self.buf) >= remaining:  # the announced length was right
                del self.buf[:remaining]
                return
            drop = max(0, len(self.buf) - 64)  # a tail that may start a header stays
            del self.buf[:drop]
            remaining -= drop
            if await self._fill() is None:
                self.buf.clear()
                return


async def serve(reader: MessageReader, protocol, stop_event: threading.Event,
                report: Callable[[str, Any, int], None]) -> None:
    """The message loop: read, decode, hand to the protocol. Nothing a client
    sends ends it except the end of the stream (and `exit`)."""
    while not stop_event.is_set():
        body = await reader.next()
        if body is None:
            break
        message = _decode(body, protocol)
        if message is _INVALID:
            candidate = reader.recover(body)
            if candidate is not None and candidate.strip():
                message = _decode(candidate, protocol)
                body = candidate
            if message is _INVALID:
                if body.strip():
                    reader.problem(f"a message is not valid JSON ({len(body)} bytes): skipped",
                                   request_id(body[:4096]), PARSE_ERROR)
                continue
            reader.problem(f"a message announced more bytes than it had ({len(body)}); "
                           "read it as sent")
        if not hasattr(message, "jsonrpc"):  # JSON, but not a JSON-RPC message
            msg_id = message.get("id") if isinstance(message, dict) else None
            if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
                msg_id = None
            reader.problem("a message is not a JSON-RPC 2.0 object: skipped", msg_id,
                           INVALID_REQUEST)
            continue
        try:
            protocol.handle_message(message)
        except Exception:
            log.exception("handling a message failed")
        await asyncio.sleep(0)  # let the handlers just started take their first step


_INVALID = object()


def _json_before_header(data: bytes) -> int | None:
    """Where a header name follows a complete JSON value at the start of
    `data`."""
    for m in _HEADER_NAME.finditer(data):
        if m.start() > 0 and _is_json(data[:m.start()]):
            return m.start()
    return None


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


def _decode(body: bytes, protocol) -> Any:
    try:
        return json.loads(body, object_hook=protocol.structure_message)
    except (ValueError, RecursionError):
        return _INVALID
