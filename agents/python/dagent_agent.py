"""A dagent agent over the HTTP API, on the Python standard library only.

    from dagent_agent import Agent, Task, TaskContext

    def handle(task: Task, ctx: TaskContext) -> object:
        return {"echo": task.spec.get("prompt")}

    Agent.from_args(handle, agent_type="echo", capabilities=["echo"]).run()

The loop registers the agent, claims one task at a time (straight into
RUNNING), heartbeats it from a background thread, and reports the handler's
return value (complete) or exception (fail). On SIGTERM/SIGINT it stops
claiming, gives the task in hand `--grace-sec` to finish, releases it
otherwise, and exits 0. `ctx.step` (dagent_steps.py) records a piece of the
work so that a later attempt replays it instead of doing it again; `ctx.report_cost`
(dagent_usage.py) charges usage at once and stops the attempt at its spend limits; `ctx.stream`
(dagent_streams.py) writes text and JSON that people follow live.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
import urllib.error
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dagent_client import TRANSPORT_ERRORS, ApiError, Client, LeaseLost
from dagent_steps import AttemptSteps
from dagent_streams import STREAM_NAME_DEFAULT, AttemptStreams, StreamWriter
from dagent_usage import AttemptUsage, BudgetExceeded, LimitReached, UsageAnswer, usage_figures

__all__ = ["Agent", "ApiError", "BudgetExceeded", "Client", "Handler", "LeaseLost", "LimitReached", "StreamWriter", "Task",
           "TaskContext", "TaskError", "UsageAnswer", "Waiting"]

log = logging.getLogger("dagent")

# The levels ctx.log stores (pino's), as Python's logging levels for this process's own output.
LOG_LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR, "fatal": logging.CRITICAL}
# Lines per request (the server takes up to 500); a batch goes out when this many are buffered.
LOG_BATCH = 100

# Reports (complete, fail, release) are retried with backoff while the server answers 5xx or cannot
# be reached, for up to REPORT_GIVE_UP_SEC: past that the lease has lapsed anyway.
REPORT_RETRY_MIN_SEC = 0.25
REPORT_RETRY_MAX_SEC = 5.0
REPORT_GIVE_UP_SEC = 120.0
# The first heartbeat of a task, its "received" (the server's reaper treats a lease lapsed before any
# sign of life as a lost claim reply, not an attempt).
RECEIVED_BEAT_SEC = 2.0


class Waiting(Exception):
    """Raised by `spawn(wait=True)`: the attempt has ended, the task runs again later."""


class TaskError(Exception):
    """Raise from a handler to fail with a chosen error class (default: error, as the TypeScript runtime)."""

    def __init__(self, error_class: str, message: str, retryable: Optional[bool] = None) -> None:
        super().__init__(message)
        self.error_class, self.retryable = error_class, retryable


@dataclass
class Task:
    """A claimed task (the claim's JSON, with snake_case names)."""

    id: str
    dag_id: str
    key: str
    type: str
    title: Optional[str]
    fence: int
    attempt: int
    max_attempts: int
    spec: dict[str, Any]
    inputs: dict[str, Any]
    children: dict[str, Any]
    heartbeat_sec: int
    max_duration_sec: Optional[int]
    # The model to run this attempt on (one the agent registered), or None when the task names none.
    model: Optional[str] = None
    models: list[str] = field(default_factory=list)
    # On a retry, the latest failed attempts (oldest first): errorClass, errorMessage, rejectedOutput, verdicts.
    previous_attempts: list[dict[str, Any]] = field(default_factory=list)
    # This attempt's W3C trace context: start the handler's own spans under it (or send it on as the
    # `traceparent` header) and they nest under the attempt's span in dagent's trace.
    traceparent: Optional[str] = None

    @classmethod
    def from_json(cls, t: dict[str, Any]) -> "Task":
        return cls(t["id"], t["dagId"], t["key"], t["type"], t.get("title"), t["fence"], t["attempt"],
                   t["maxAttempts"], t.get("spec") or {}, t.get("inputs") or {}, t.get("children") or {},
                   t.get("heartbeatSec") or 20, t.get("maxDurationSec"), t.get("model"), t.get("models") or [],
                   t.get("previousAttempts") or [], t.get("traceparent"))


@dataclass
class TaskContext:
    """What a handler may do besides returning: progress, subtasks, cost, durable steps, streams."""

    client: Client
    task: Task
    # Set when the task is no longer this attempt's (a lost lease, a spend limit): the agent reports nothing more.
    lost: threading.Event = field(default_factory=threading.Event)
    # The model last reported with report_cost: the attempt's end names it.
    model: Optional[str] = None
    _lines: list[dict[str, Any]] = field(default_factory=list)
    _lines_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._steps = AttemptSteps(self.client, self.task.id, self.task.fence, self.log, self.lost.set, self.lost.is_set)
        self._usage = AttemptUsage(self.client, self.task.id, self.task.fence, self.lost)
        self._streams = AttemptStreams(self.client, self.task.id, self.task.fence, self.lost)

    @property
    def budget_stopped(self) -> Optional[LimitReached]:
        """The limit a report passed, when one did: the server failed the attempt (budget_exceeded)."""
        return self._usage.stopped

    def end_spend(self) -> dict[str, Any]:
        """What the attempt's end reports: no cost, as every report_cost was charged when made; the model."""
        return {"cost_usd": 0, "tokens_in": 0, "tokens_out": 0, "model": self.model}

    def step(self, name: str, fn: Callable[[], Any], scope: str = "task") -> Any:
        """A durable step: the result an earlier attempt recorded under `name` (fn is not called),
        else fn() (no arguments), its JSON result recorded under this attempt's fence and returned.
        scope "task" (default): replayed by every later attempt; "attempt": run afresh in each,
        recorded for visibility. A step that raises records nothing; a name used twice in one
        attempt, or a result JSON cannot encode, is a ValueError; a write the server refuses
        because the task is no longer ours raises LeaseLost and the agent drops the task.
        What report_cost reports while fn runs (in its thread) is recorded with the step."""
        return self._steps.run(name, fn, scope)

    def stream(self, name: str = STREAM_NAME_DEFAULT) -> StreamWriter:
        """The attempt's writer for stream `name` (dagent_streams.py): write(text or JSON value), flush(), end(),
        ended. Sent in batches, each written once; flushed before the attempt's outcome."""
        return self._streams.open(name)

    def flush_before_end(self, final: bool = True) -> None:
        """What the attempt's end sends first (the runtime calls it): its streams' buffers, then its log lines.
        `final`: the attempt ends (its streams take no more writes); False: it may go on (a spawn that may wait)."""
        self._streams.close(final)
        self.flush_logs()

    def log(self, message: str, level: str = "info", **fields: Any) -> None:
        """Log a line: printed by this process, and stored with this attempt (dagent logs, the
        dashboard, dlq show). Lines go in batches, and before the attempt's outcome."""
        log.log(LOG_LEVELS.get(level, logging.INFO), "%s: %s", self.task.key, message)
        line: dict[str, Any] = {"level": level if level in LOG_LEVELS else "info", "message": str(message), "at": int(time.time() * 1000)}
        if fields:
            line["fields"] = fields
        with self._lines_lock:
            self._lines.append(line)
            full = len(self._lines) >= LOG_BATCH
        if full:
            self.flush_logs()

    def flush_logs(self) -> None:
        """Send the buffered lines now (the runtime does before it reports the outcome)."""
        with self._lines_lock:
            batch, self._lines = self._lines, []
        for i in range(0, len(batch), LOG_BATCH):
            try:
                self.client.task(self.task.id, "logs", self.task.fence, lines=batch[i:i + LOG_BATCH])
            except LeaseLost:
                self.lost.set()
                return
            except Exception as e:  # noqa: BLE001 - a log line is not worth failing the task for
                log.warning("%s: log lines not stored: %s", self.task.id, e)

    def heartbeat(self, progress: Optional[float] = None, message: Optional[str] = None) -> None:
        try:
            self.client.task(self.task.id, "heartbeat", self.task.fence, progress=progress, message=message)
        except LeaseLost:
            self.lost.set()
            raise

    def spawn(self, subtasks: list[dict[str, Any]], wait: bool = False) -> list[dict[str, Any]]:
        """Add subtasks. With wait, raises Waiting unless they have all completed
        already (then each child carries its `output`): write the handler as a
        resumable step with deterministic keys."""
        # A wait ends the attempt: its lines go first, and it names the model, as every end does.
        end = self.end_spend() if wait else {}
        if wait:
            self.flush_before_end(final=False)
        r = self.client.task(self.task.id, "spawn", self.task.fence, subtasks=subtasks, wait=wait, **end)
        if r["waiting"]:
            raise Waiting()
        return r["children"]

    def report_cost(self, usd: Optional[float] = 0, tokens_in: int = 0, tokens_out: int = 0,
                    model: Optional[str] = None) -> Optional[UsageAnswer]:
        """Report usage since the last report (not a running total), charged at once (dagent_usage.py): returns
        the answer (remaining_usd, the attempt's usage so far), None for a report of nothing. Bad figures raise
        ValueError, unsent; a report past a spend limit raises BudgetExceeded (the server failed the attempt)."""
        usd, tokens_in, tokens_out = usage_figures(usd, tokens_in, tokens_out, model)
        answer = self._usage.report(usd, tokens_in, tokens_out, model)
        if model:
            self.model = model
        self._steps.report_cost(usd, tokens_in, tokens_out, model)
        return answer


Handler = Callable[[Task, TaskContext], Any]


@dataclass
class Agent:
    """The claim → run → report loop for one agent id, one task at a time."""

    client: Client
    # None: the agent its token acts as (GET /api/whoami), learnt at start.
    id: Optional[str]
    type: str
    capabilities: list[str]
    handler: Handler
    poll_sec: float = 0.5
    # Long poll: with nothing READY for it, the claim waits on the server up to this long (0: poll every poll_sec).
    wait_sec: float = 10.0
    grace_sec: float = 10.0
    max_tasks: Optional[int] = None
    exit_when_idle: Optional[float] = None
    # Models it can use ("*": any): it is offered only tasks that name none or one of these.
    models: list[str] = field(default_factory=list)
    stopping: bool = False

    @classmethod
    def from_args(cls, handler: Handler, agent_type: str, capabilities: list[str]) -> "Agent":
        env = os.environ.get
        p = argparse.ArgumentParser(description=f"dagent agent ({agent_type}) over the HTTP API")
        p.add_argument("--url", default=env("DAGENT_URL", "http://127.0.0.1:7070"))
        p.add_argument("--token", default=env("DAGENT_TOKEN"), help="agent token (env DAGENT_TOKEN)")
        p.add_argument("--id", default=env("DAGENT_AGENT_ID"),
                       help="agent id (env DAGENT_AGENT_ID); default: the agent its token acts as")
        p.add_argument("--poll-sec", type=float, default=float(env("DAGENT_POLL_SEC", "0.5")),
                       help="pause between claims that found nothing, when not waiting on the server (--wait-sec 0)")
        p.add_argument("--wait-sec", type=float, default=float(env("DAGENT_WAIT_SEC", "10")),
                       help="with nothing READY, the claim waits on the server up to this long, at most 30 (env DAGENT_WAIT_SEC)")
        p.add_argument("--grace-sec", type=float, default=10.0, help="on SIGTERM, time to finish before release")
        p.add_argument("--max-tasks", type=int, help="exit after handling this many tasks")
        p.add_argument("--exit-when-idle", type=float, metavar="SECONDS", help="exit after this long without a task")
        p.add_argument("--models", default=env("DAGENT_MODELS", ""),
                       help="comma-separated models it can use, or * for any (env DAGENT_MODELS); default none")
        a = p.parse_args()
        if not a.token:
            p.error("a token is needed: --token or DAGENT_TOKEN")
        logging.basicConfig(level=env("DAGENT_LOG_LEVEL", "INFO").upper(),
                            format="%(asctime)s %(levelname)s %(message)s")
        models = [m.strip() for m in a.models.split(",") if m.strip()]
        # A waiting claim holds the request open: the socket timeout allows for it.
        return cls(Client(a.url, a.token, timeout=30.0 + max(0.0, min(30.0, a.wait_sec))), a.id, agent_type, capabilities, handler,
                   a.poll_sec, max(0.0, min(30.0, a.wait_sec)), a.grace_sec, a.max_tasks, a.exit_when_idle, models)

    def _stop(self, signum: int, _frame: Any) -> None:
        log.info("%s: stopping (signal %d)", self.id, signum)
        self.stopping = True

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < end:
            time.sleep(max(0.0, min(0.05, end - time.monotonic())))

    def run(self) -> int:
        """Register, then claim and run tasks until stopped, idle or done; returns the exit code."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        try:
            if not self.id:
                # The id its token acts as: the same at every restart. An admin token acts as none: name it after the host.
                who = self.client.call("/api/whoami", method="GET")
                self.id = who.get("agentId") or f"{self.type}-{socket.gethostname()}"
            self.client.call("/api/agents", {"id": self.id, "type": self.type, "capabilities": self.capabilities,
                                             "models": self.models, "metadata": {"runtime": "python"}})
        except (ApiError, urllib.error.URLError) as e:
            log.error("%s: cannot register at %s: %s", self.id, self.client.url, e)
            return 1
        log.info("%s: registered with capabilities %s", self.id, ",".join(self.capabilities))
        done, idle_since = 0, time.monotonic()
        beat_at = idle_since  # registering counts as a heartbeat
        while not self.stopping and (self.max_tasks is None or done < self.max_tasks):
            now, tasks = time.monotonic(), []
            # Wait on the server, but never past the idle exit.
            wait = self.wait_sec
            if self.exit_when_idle is not None:
                wait = min(wait, max(0.0, self.exit_when_idle - (now - idle_since)))
            body: dict[str, Any] = {"limit": 1, "start": True}
            if wait >= 0.1:
                body["wait_sec"] = round(wait, 1)
            try:
                if now - beat_at >= 10:  # agents silent for 90 s go offline, and offline agents claim nothing
                    self.client.call(f"/api/agents/{self.id}/heartbeat")
                    beat_at = now
                tasks = self.client.call(f"/api/agents/{self.id}/claim", body)["tasks"]
            except ApiError as e:
                if e.status < 500:
                    log.error("%s: %s", self.id, e)
                    return 1
                log.warning("%s: claim failed (%s); retrying", self.id, e)
            except OSError as e:  # URLError, a refused or reset connection, a read timeout
                log.warning("%s: server unreachable (%s); retrying", self.id, e)
            if tasks and self.stopping:
                # Stopped while the claim waited: give the task back at once rather than run it into the grace period.
                first = Task.from_json(tasks[0])
                self._report(first, "release", reason="agent shutting down")
                break
            if not tasks:
                idle = time.monotonic() - idle_since
                if self.exit_when_idle is not None and idle >= self.exit_when_idle:
                    log.info("%s: idle for %.1f s, exiting", self.id, idle)
                    break
                if "wait_sec" not in body or time.monotonic() - now < min(wait, 1.0):
                    # No wait on the server, or it answered well before the wait (an error, its ceiling): pause.
                    self._sleep(self.poll_sec)
                continue
            self._run_one(Task.from_json(tasks[0]))
            done += 1
            idle_since = time.monotonic()
        log.info("%s: handled %d task(s), bye", self.id, done)
        return 0

    def _run_one(self, task: Task) -> None:
        ctx = TaskContext(self.client, task)
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["output"] = self.handler(task, ctx)
            except BaseException as e:  # noqa: BLE001 - every failure is reported
                outcome["error"] = e

        def beat(stop: threading.Event) -> None:
            # The first beat goes out soon: it says "received". Until then a lapsed lease is taken for a
            # lost claim reply and costs the task no attempt.
            wait = min(RECEIVED_BEAT_SEC, task.heartbeat_sec)
            while not stop.wait(wait):
                wait = task.heartbeat_sec
                try:
                    self.client.task(task.id, "heartbeat", task.fence)
                except LeaseLost:
                    ctx.lost.set()
                    return
                except Exception as e:  # noqa: BLE001 - a missed beat is not fatal; the lease spans three
                    log.warning("%s: heartbeat failed: %s", task.id, e)

        log.info("%s: running %s (%s, attempt %d)", self.id, task.key, task.type, task.attempt)
        stop_beat = threading.Event()
        worker = threading.Thread(target=work, daemon=True)
        threading.Thread(target=beat, args=(stop_beat,), daemon=True).start()
        started, stop_at = time.monotonic(), None
        worker.start()
        try:
            while worker.is_alive() and not ctx.lost.is_set():
                worker.join(0.05)
                if self.stopping and stop_at is None:
                    stop_at = time.monotonic() + self.grace_sec
                if stop_at is not None and time.monotonic() >= stop_at:
                    ctx.flush_before_end()
                    self._report(task, "release", reason="agent shutting down", **ctx.end_spend())
                    return
                if task.max_duration_sec and time.monotonic() - started > task.max_duration_sec:
                    message = f"ran past max_duration_sec {task.max_duration_sec}"
                    ctx.flush_before_end()
                    self._report(task, "fail", error_class="timeout", message=message, **ctx.end_spend())
                    return
        finally:
            stop_beat.set()
        if not ctx.lost.is_set():
            ctx.flush_before_end()  # the attempt's streams and lines before its outcome: afterwards nothing joins it
        error = outcome.get("error")
        if error is None:
            try:
                json.dumps(outcome.get("output"))
            except (TypeError, ValueError) as e:
                error = TaskError("invalid_output", f"the output is not JSON: {e}")
        if ctx.budget_stopped is not None:
            # The server failed the attempt when the report passed the limit: nothing to report.
            limit = ctx.budget_stopped
            log.warning("%s: %s stopped at its spend limit (failed budget_exceeded): %s", self.id, task.key, limit)
        elif ctx.lost.is_set() or isinstance(error, LeaseLost):
            log.warning("%s: lease lost on %s; dropping it", self.id, task.key)
        elif isinstance(error, Waiting):
            log.info("%s: %s waits for its subtasks", self.id, task.key)
        elif error is not None:
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self._report(task, "fail", error_class=getattr(error, "error_class", "error"),
                         message=str(error) or type(error).__name__, retryable=getattr(error, "retryable", None),
                         details={"exception": type(error).__name__, "traceback": trace[-16000:]}, **ctx.end_spend())
        else:
            self._report(task, "complete", output=outcome.get("output"), **ctx.end_spend())

    def _report(self, task: Task, action: str, **body: Any) -> None:
        """Report the outcome, retrying with backoff while the server or its database is unavailable
        (a 503 with Retry-After, another 5xx, a dropped connection): a finished result is not thrown
        away on a blip. Reports are idempotent: one made again after a lost reply is applied once."""
        delay, give_up = REPORT_RETRY_MIN_SEC, time.monotonic() + REPORT_GIVE_UP_SEC
        while True:
            try:
                r = self.client.task(task.id, action, task.fence, **body)
                log.info("%s: %s %s -> %s", self.id, action, task.key, json.dumps(r))
                return
            except LeaseLost as e:
                log.warning("%s: %s %s refused, lease lost: %s", self.id, action, task.key, e.message)
                return
            except ApiError as e:
                if e.status < 500 or time.monotonic() >= give_up:
                    log.error("%s: %s %s failed: %s", self.id, action, task.key, e)
                    return
                wait = max(delay, e.retry_after or 0)
            except TRANSPORT_ERRORS as e:
                if time.monotonic() >= give_up:
                    log.error("%s: %s %s failed: %s", self.id, action, task.key, e)
                    return
                wait = delay
            log.warning("%s: %s %s: server unavailable; retrying in %.1f s", self.id, action, task.key, wait)
            time.sleep(wait)
            delay = min(delay * 2, REPORT_RETRY_MAX_SEC)
