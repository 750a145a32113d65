"""The agent routes of dagent's HTTP API as JSON calls, on the Python standard library only.

Used by dagent_agent.py (the run loop and the task context), dagent_steps.py (durable steps) and
dagent_usage.py (usage reports);
handlers reach it through `ctx.client`, and import its errors from dagent_agent.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

log = logging.getLogger("dagent")

# What a call raises when the server cannot be reached or its reply is lost: a refused or reset
# connection, a read timeout (OSError, urllib's URLError among them), a reply cut short
# (http.client's IncompleteRead is not an OSError). The call may or may not have been applied.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)

# A call that is safe to repeat (a step's lookup or write, a usage report under its report_id) is tried this
# many times while the server cannot be reached, answers 5xx or 429, or the reply is lost, with backoff from
# RETRY_MIN_SEC doubling to RETRY_MAX_SEC (about 40 s in all: a server restart, not an outage). The server
# applies a repeat once: a step keeps its first write, a report_id is charged once.
RETRY_ATTEMPTS = 12
RETRY_MIN_SEC = 0.25
RETRY_MAX_SEC = 5.0


class ApiError(Exception):
    """An error answer from the server: `{error: {code, message, ...}}`."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None,
                 details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after
        # The error's other fields (e.g. lateCharged on a usage report the server charged after the attempt ended).
        self.details = details or {}


class LeaseLost(ApiError):
    """409 LEASE_LOST: the task is no longer ours. Stop; never retry the call."""


class Client:
    """Thin JSON-over-HTTP client for the agent routes."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, path: str, body: Optional[dict[str, Any]] = None, method: str = "POST") -> Any:
        req = urllib.request.Request(
            self.url + path, method=method, data=None if method == "GET" else json.dumps(body or {}).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read()).get("error", {})
            except ValueError:
                err = {}
            cls = LeaseLost if err.get("code") == "LEASE_LOST" else ApiError
            try:
                retry_after = float(e.headers.get("Retry-After")) if e.headers.get("Retry-After") else None
            except ValueError:
                retry_after = None
            details = {k: v for k, v in err.items() if k not in ("code", "message")}
            raise cls(e.code, err.get("code", "HTTP"), err.get("message", e.reason), retry_after, details) from None

    def held(self, path: str, body: Optional[dict[str, Any]] = None, method: str = "POST") -> Any:
        """A call on a task this agent claimed (`path` under /api/tasks/:id)."""
        try:
            return self.call(path, body, method)
        except ApiError as e:
            # A task we claimed answering 403 has been reaped and claimed by another agent: lost as well.
            if e.code == "FORBIDDEN" and not isinstance(e, LeaseLost):
                raise LeaseLost(e.status, e.code, e.message, None, e.details) from None
            raise

    def task(self, task_id: str, action: str, fence: int, **body: Any) -> Any:
        payload = {k: v for k, v in body.items() if v is not None}
        return self.held(f"/api/tasks/{task_id}/{action}", {"fence": fence, **payload})


def retried(call: Callable[[], Any], what: str) -> Any:
    """`call`, tried again while the server is unreachable or busy or the reply is lost (only for calls the
    server applies once however often they are sent); `what` names it in the log. Any other error (a 409
    LeaseLost among them), or the last try's, is raised."""
    tries, delay = 1, RETRY_MIN_SEC
    while True:
        try:
            return call()
        except ApiError as e:
            if not (e.status >= 500 or e.status == 429) or tries >= RETRY_ATTEMPTS:
                raise
            wait, reason = max(delay, e.retry_after or 0), str(e)
        except TRANSPORT_ERRORS as e:
            if tries >= RETRY_ATTEMPTS:
                raise
            wait, reason = delay, f"{type(e).__name__}: {e}"
        log.warning("%s: %s; retrying in %.2f s", what, reason, wait)
        time.sleep(wait)
        tries, delay = tries + 1, min(delay * 2, RETRY_MAX_SEC)
