"""The agent routes of dagent's HTTP API as JSON calls, on the Python standard library only.

Used by dagent_agent.py (the run loop and the task context) and dagent_steps.py (durable steps);
handlers reach it through `ctx.client`, and import its errors from dagent_agent.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any, Optional

# What a call raises when the server cannot be reached or its reply is lost: a refused or reset
# connection, a read timeout (OSError, urllib's URLError among them), a reply cut short
# (http.client's IncompleteRead is not an OSError). The call may or may not have been applied.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


class ApiError(Exception):
    """An error answer from the server: `{error: {code, message, ...}}`."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


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
            raise cls(e.code, err.get("code", "HTTP"), err.get("message", e.reason), retry_after) from None

    def held(self, path: str, body: Optional[dict[str, Any]] = None, method: str = "POST") -> Any:
        """A call on a task this agent claimed (`path` under /api/tasks/:id)."""
        try:
            return self.call(path, body, method)
        except ApiError as e:
            # A task we claimed answering 403 has been reaped and claimed by another agent: lost as well.
            if e.code == "FORBIDDEN" and not isinstance(e, LeaseLost):
                raise LeaseLost(e.status, e.code, e.message) from None
            raise

    def task(self, task_id: str, action: str, fence: int, **body: Any) -> Any:
        payload = {k: v for k, v in body.items() if v is not None}
        return self.held(f"/api/tasks/{task_id}/{action}", {"fence": fence, **payload})
