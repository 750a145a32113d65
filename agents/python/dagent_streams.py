"""Streams for Python agents: `ctx.stream(name="output")`.

The same as the TypeScript runtime's ctx.stream (src/runtime/attempt-streams.ts), over POST
/api/tasks/:id/streams/:name: what a handler writes (text a token at a time, or JSON values) is buffered and
sent in batches, one request per BATCH_SEC at most (sooner past BATCH_BYTES, or on flush/end), adjacent text
coalesced into chunks of at most CHUNK_BYTES. Each request names the sequence number its first chunk takes
(from_seq), so one sent again after a lost reply is written once. People follow the stream live (GET on the
same path, as server-sent events; `dagent stream TASK`). The agent flushes every stream before it reports the
attempt's outcome; a stream its handler did not end ends with the attempt.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.parse
from typing import Any, Optional

from dagent_client import Client, LeaseLost, retried

log = logging.getLogger("dagent")

# The server's rules and defaults (engine/attempt/streams.ts STREAM_NAME_PATTERN and STREAM_CHUNKS_PER_WRITE,
# config STREAM_DEFAULTS.batchMs and batchBytes, LIMITS.streamChunkBytes).
STREAM_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
STREAM_NAME_DEFAULT = "output"
BATCH_SEC = 0.05
BATCH_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024
REQUEST_CHUNKS = 1000
# Most bytes of chunks one request carries as JSON: the server reads bodies of up to 1 MiB, and a 64 KiB chunk
# of control characters or non-ASCII text grows up to six times when escaped.
REQUEST_BYTES = 512 * 1024

_SURROGATE = re.compile("[\ud800-\udfff]")


def _cut(data: bytes, start: int, room: int) -> int:
    """Where a piece of UTF-8 `data` from `start` holding at most `room` bytes ends, never inside a character."""
    end = min(len(data), start + room)
    while start < end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    return end


class StreamWriter:
    """One stream of an attempt: `write` text or JSON as it is produced, `end` when done. Thread-safe."""

    def __init__(self, client: Client, task_id: str, fence: int, name: str, lost: threading.Event) -> None:
        self.client, self.task_id, self.fence, self.name = client, task_id, fence, name
        self._path = f"/api/tasks/{urllib.parse.quote(task_id, safe='')}/streams/{name}"
        # Set when the task is no longer this attempt's (a lost lease, a spend limit).
        self._lost = lost
        self._ended: Optional[str] = None
        # Guards what is buffered: [kind, text pieces (UTF-8) or a JSON value, bytes] per chunk to be.
        self._cond = threading.Condition()
        self._pending: list[list[Any]] = []
        self._pending_bytes = 0
        self._oldest_at = 0.0
        self._end_requested = False
        self._end_sent = False
        self._closed = False
        # One request in flight, batches in the order they were taken: from_seq follows the last answer.
        self._sending = threading.Lock()
        self._next_seq = 1
        self._thread: Optional[threading.Thread] = None

    @property
    def ended(self) -> Optional[str]:
        """None while it takes writes; `ended` (end()), `truncated` (the attempt's streams reached the server's
        bytes per attempt: nothing more is written, the attempt goes on) or `lost` (the task is no longer this
        attempt's, or the server could not be reached: the rest is not written)."""
        return self._ended

    def write(self, value: Any) -> None:
        """Append text (joined to what came before) or a JSON value (a chunk of its own). Buffered: sent within
        BATCH_SEC. A value JSON cannot encode, or one over CHUNK_BYTES as JSON, raises ValueError; once the task is
        no longer this attempt's, LeaseLost. After end() (or truncated) a write is ignored."""
        self._check_held()
        if self._ended is not None or self._end_requested or self._closed:
            return
        if isinstance(value, str):
            # NUL cannot be stored (PostgreSQL text) and a lone surrogate is not Unicode: both become U+FFFD.
            data = _SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd")).encode("utf-8")
            if not data:
                return
            with self._cond:
                self._text(data)
                self._wake()
            return
        try:
            text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"stream {self.name}: a value that is not text must be JSON: {e}") from None
        # The server refuses a NUL anywhere in a request and cannot store a lone surrogate: a value holding either
        # is this write's error, not the loss of the batch it would have gone in.
        if "\x00" in text or _SURROGATE.search(text):
            raise ValueError(f"stream {self.name}: a JSON value may not hold a NUL or a lone surrogate")
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > CHUNK_BYTES:
            raise ValueError(f"stream {self.name}: a JSON chunk holds at most {CHUNK_BYTES} bytes, not {size}")
        with self._cond:
            # A copy as it is now: the handler may change its value after writing it.
            self._push(["json", json.loads(text), size])
            self._wake()

    def flush(self) -> None:
        """Send what is buffered now; returns once it is written (or the stream has ended). LeaseLost when the task
        is no longer this attempt's."""
        self._send_pending()
        self._check_held()

    def end(self) -> None:
        """End the stream: what is buffered, then the end (readers see it end). Later writes are ignored."""
        self._check_held()
        with self._cond:
            self._end_requested = True
        self.flush()

    def close(self, final: bool = True) -> None:
        """Before the attempt's end: send what is buffered (without ending the stream: it ends with the attempt);
        `final`, stop its sender too, later writes dropped. Never raises."""
        if final:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
        self._send_pending()

    def _check_held(self) -> None:
        if self._lost.is_set():
            raise LeaseLost(409, "LEASE_LOST", f"stream {self.name}: not written: the task is no longer held by this attempt")

    def _text(self, data: bytes) -> None:
        """Text joins the last pending text chunk while it fits, then fills new ones (under the lock)."""
        at = 0
        while at < len(data):
            last = self._pending[-1] if self._pending and self._pending[-1][0] == "text" else None
            if last is not None and last[2] < CHUNK_BYTES:
                end = _cut(data, at, CHUNK_BYTES - last[2])
                if end > at:
                    last[1].append(data[at:end])
                    last[2] += end - at
                    self._pending_bytes += end - at
                    at = end
                    continue
            end = _cut(data, at, CHUNK_BYTES)
            self._push(["text", [data[at:end]], end - at])
            at = end

    def _push(self, chunk: list[Any]) -> None:
        if not self._pending:
            self._oldest_at = time.monotonic()
        self._pending.append(chunk)
        self._pending_bytes += chunk[2]

    def _wake(self) -> None:
        """The sender sees the write (under the lock); started at the first."""
        self._cond.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._sender, name=f"dagent-stream-{self.name}", daemon=True)
            self._thread.start()

    def _sender(self) -> None:
        """Sends a batch BATCH_SEC after its oldest write, or once BATCH_BYTES are buffered."""
        while True:
            with self._cond:
                while not self._pending and not self._closed and self._ended is None and not self._lost.is_set():
                    # Woken by a write; the timeout notices a task lost meanwhile (then this thread ends).
                    self._cond.wait(1.0)
                if self._ended is not None or self._lost.is_set() or (self._closed and not self._pending):
                    return
                while self._pending and not self._closed and self._pending_bytes < BATCH_BYTES:
                    left = self._oldest_at + BATCH_SEC - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            self._send_pending()

    def _send_pending(self) -> None:
        """Send what is buffered (and the end, when asked for), in requests the server takes; never raises."""
        with self._sending:
            with self._cond:
                batch, self._pending, self._pending_bytes = self._pending, [], 0
                end = self._end_requested and not self._end_sent
            if self._ended is not None or (not batch and not end):
                return
            chunks = [{"text": b"".join(c[1]).decode("utf-8")} if c[0] == "text" else {"json": c[1]} for c in batch]
            requests: list[list[dict[str, Any]]] = [[]]
            size = 0
            for c in chunks:
                n = len(json.dumps(c))
                if requests[-1] and (size + n > REQUEST_BYTES or len(requests[-1]) >= REQUEST_CHUNKS):
                    requests.append([])
                    size = 0
                requests[-1].append(c)
                size += n
            for i, part in enumerate(requests):
                self._post(part, end and i == len(requests) - 1)
                if self._ended is not None:
                    return
            self._end_sent = self._end_sent or end

    def _post(self, chunks: list[dict[str, Any]], end: bool) -> None:
        """One request, sent again unchanged while the server is unreachable or busy or the reply is lost: it
        names its from_seq, so the server writes it once."""
        body: dict[str, Any] = {"fence": self.fence, "from_seq": self._next_seq, "chunks": chunks}
        if end:
            body["end"] = True
        what = f"{self.task_id}: stream {self.name} write from {self._next_seq}"
        try:
            answer = retried(lambda: self.client.held(self._path, body), what)
        except LeaseLost as e:
            log.warning("%s: stream %s not written: the lease was lost (%s); abandoning the task", self.task_id, self.name, e.message)
            self._ended = "lost"
            self._lost.set()
            return
        except Exception as e:  # noqa: BLE001 - a stream is not worth failing the task for
            log.error("%s: stream %s: write failed (%s); the rest of the stream is not written, the attempt goes on",
                      self.task_id, self.name, e)
            self._ended = "lost"
            return
        self._next_seq = int(answer["chunks"]) + 1
        if answer.get("ended") == "truncated":
            self._ended = "truncated"
            log.warning("%s: stream %s truncated: the attempt's streams reached their bytes; the attempt goes on", self.task_id, self.name)
        elif answer.get("ended"):
            self._ended = answer["ended"]


class AttemptStreams:
    """One attempt's streams, by name."""

    def __init__(self, client: Client, task_id: str, fence: int, lost: threading.Event) -> None:
        self.client, self.task_id, self.fence, self.lost = client, task_id, fence, lost
        self._streams: dict[str, StreamWriter] = {}
        self._lock = threading.Lock()

    def open(self, name: str = STREAM_NAME_DEFAULT) -> StreamWriter:
        """The attempt's writer for `name` (the same one each time); ValueError for a name the server refuses."""
        if not isinstance(name, str) or not STREAM_NAME_PATTERN.fullmatch(name):
            raise ValueError(f"stream name {name!r}: lowercase letters, digits, _ . - (1-64, starting with a letter or digit)")
        with self._lock:
            s = self._streams.get(name)
            if s is None:
                s = self._streams[name] = StreamWriter(self.client, self.task_id, self.fence, name, self.lost)
            return s

    def close(self, final: bool = True) -> None:
        """Before the attempt's outcome: every stream's buffer sent; `final`, their senders stopped."""
        with self._lock:
            streams = list(self._streams.values())
        for s in streams:
            s.close(final)
