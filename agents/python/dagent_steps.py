"""Durable steps for Python agents: `ctx.step(name, fn, scope="task")`.

The same semantics as the TypeScript runtime's ctx.step (src/runtime/attempt-steps.ts), over
GET and PUT /api/tasks/:id/steps/:name: a step recorded by an earlier attempt is replayed (its
result returned, `fn` not called); otherwise `fn` runs and its JSON result is recorded under the
attempt's fence. First write wins; a write from an attempt that no longer holds the task is
refused (409 LEASE_LOST) and records nothing.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
import unicodedata
import urllib.parse
from typing import Any, Callable, Optional

from dagent_client import ApiError, Client, LeaseLost, retried

log = logging.getLogger("dagent")

# Longest step name, in UTF-16 code units as the server counts them (engine/attempt/steps.ts STEP_NAME_MAX).
STEP_NAME_MAX = 200
STEP_SCOPES = ("task", "attempt")
# A step's lookup and record are sent again while the server is unreachable or busy, or the reply is lost
# (dagent_client.retried: RETRY_ATTEMPTS tries, about 40 s). Repeating a record is safe: the server keeps the
# first write and answers a repeat with it. Past the last try the step raises and the attempt fails; a write
# that had landed is replayed by the next attempt.

# The step running in this context and what was reported spent inside it (ctx.report_cost from the
# thread, or a context copied from it, that runs the step's fn).
_running: contextvars.ContextVar[Optional[tuple["AttemptSteps", dict[str, Any]]]] = contextvars.ContextVar("dagent_step", default=None)


def step_name_problem(name: Any) -> Optional[str]:
    """Why a step name cannot be used (the server's rule), or None."""
    if not isinstance(name, str):
        return "must be a string"
    units = len(name.encode("utf-16-le", "surrogatepass")) // 2
    if units == 0 or units > STEP_NAME_MAX:
        return f"must be 1-{STEP_NAME_MAX} characters, not {units}"
    # Printable: a newline would forge lines in logs and listings.
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "must not contain control characters"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired UTF-16 surrogate (not valid Unicode)"
    return None


class AttemptSteps:
    """One attempt's durable steps: the names it used, and the spend reported inside each step."""

    def __init__(self, client: Client, task_id: str, fence: int,
                 attempt_log: Callable[..., None], lease_lost: Callable[[], None], is_lost: Callable[[], bool]) -> None:
        self.client, self.task_id, self.fence = client, task_id, fence
        # ctx.log: replays and failed steps are stored with the attempt.
        self.attempt_log = attempt_log
        # The task is no longer ours: the agent stops waiting for the handler and reports nothing.
        self.lease_lost, self.is_lost = lease_lost, is_lost
        self.used: set[str] = set()

    def report_cost(self, usd: Optional[float], tokens_in: int, tokens_out: int, model: Optional[str]) -> None:
        """Spend reported now: also the running step's, if reported from inside one of this attempt's."""
        running = _running.get()
        if running is None or running[0] is not self:
            return
        spend = running[1]
        spend["cost_usd"] += usd or 0
        spend["tokens_in"] += tokens_in
        spend["tokens_out"] += tokens_out
        if model:
            spend["model"] = model

    def run(self, name: str, fn: Callable[[], Any], scope: str = "task") -> Any:
        bad = step_name_problem(name)
        if bad:
            raise ValueError(f"step {json.dumps(name) if isinstance(name, str) else repr(name)}: name {bad}")
        label = json.dumps(name)
        if not callable(fn):
            raise ValueError(f"step {label}: fn must be a function (no arguments) returning the step's result")
        if scope not in STEP_SCOPES:
            raise ValueError(f"step {label}: scope must be 'task' or 'attempt', not {scope!r}")
        if name in self.used:
            raise ValueError(f"step {label}: the name is already used in this attempt; each step of an attempt needs a name of its own")
        self.used.add(name)
        if self.is_lost():
            raise LeaseLost(409, "LEASE_LOST", f"step {label} not run: the task is no longer held by this attempt")
        path = f"/api/tasks/{self.task_id}/steps/{urllib.parse.quote(name, safe='')}"

        if scope == "task":
            found = self._held(label, "lookup", lambda: self._lookup(path))
            if found is not None:
                self.attempt_log("step replayed", step=name, recordedByAttempt=found.get("attempt"), costUsd=found.get("costUsd"))
                return found.get("result")

        spend: dict[str, Any] = {"cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0, "model": None}
        started = time.monotonic()
        token = _running.set((self, spend))
        try:
            value = fn()
        except BaseException as e:
            self.attempt_log("step failed; nothing recorded", level="warn", step=name, error=f"{type(e).__name__}: {e}")
            raise
        finally:
            _running.reset(token)
        duration_ms = int((time.monotonic() - started) * 1000)
        try:
            # NaN and infinities are not JSON: the server would refuse the whole write.
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"step {label}: result cannot be stored as JSON: {e}; nothing was recorded") from None
        body = {"fence": self.fence, "result": value, "scope": scope, "duration_ms": duration_ms,
                **{k: v for k, v in spend.items() if v is not None}}
        answer = self._held(label, "record", lambda: self.client.held(path, body, method="PUT"))
        # 201: what was sent, as the server stored it. 200: recorded already (by this write before its reply
        # was lost, or by another): first write wins, that result is the step's.
        return answer["step"]["result"]

    def _lookup(self, path: str) -> Optional[dict[str, Any]]:
        """The task-scoped step of that name, or None when none was recorded."""
        try:
            step = self.client.held(f"{path}?fence={self.fence}", method="GET")["step"]
        except ApiError as e:
            if e.status == 404 and e.code == "NOT_FOUND":
                return None
            raise
        # The route answers an attempt-scoped step when no task-scoped one exists: never replayed.
        return step if step.get("scope") == "task" else None

    def _held(self, label: str, what: str, call: Callable[[], Any]) -> Any:
        """`call`, tried again while the server is unreachable or busy; a lost lease abandons the task."""
        try:
            return retried(call, f"{self.task_id}: step {label} {what}")
        except LeaseLost as e:
            log.warning("%s: step %s not %s: the lease was lost (%s); abandoning the task",
                        self.task_id, label, "recorded" if what == "record" else "looked up", e.message)
            self.lease_lost()
            raise
