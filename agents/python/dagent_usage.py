"""Usage reported while an attempt runs, for Python agents: what `ctx.report_cost` does.

The same as the TypeScript runtime's ctx.reportCost (src/runtime/attempt-usage.ts), over POST
/api/tasks/:id/usage: each report is written to the ledger and charged to the task, its DAG and the agent
when it is made, not with the attempt's end, so a crash keeps it. Every report is held to the attempt's
limits (the task's max_cost_usd, its DAG's budget, the agent's budget): the one that passes a limit is
charged and stops the attempt (the server fails it with class budget_exceeded), and report_cost raises
BudgetExceeded. The attempt's end then reports no cost, only the model: what it spent is charged already.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Optional

from dagent_client import Client, LeaseLost, retried

log = logging.getLogger("dagent")


@dataclass(frozen=True)
class LimitReached:
    """A limit holding the attempt (`task.max_cost_usd`, `task.max_tokens`, `dag.budget_usd`,
    `dag.daily_budget_usd`, `agent.budget_usd`, `agent.daily_budget_usd`, `token.grant_budget_usd`): in USD, or in
    tokens (in + out) for `task.max_tokens`."""

    limit: str
    limit_usd: Optional[float] = None
    spent_usd: Optional[float] = None
    limit_tokens: Optional[int] = None
    spent_tokens: Optional[int] = None

    def __str__(self) -> str:
        if self.limit_tokens is not None:
            return f"{self.limit} {self.limit_tokens} reached: {self.spent_tokens} tokens spent"
        spent = f"{self.spent_usd or 0:.6f}".rstrip("0").rstrip(".")
        return f"{self.limit} {self.limit_usd:g} reached: {spent} USD spent"


@dataclass(frozen=True)
class UsageAnswer:
    """What a usage report answered once it was durable."""

    # False: this report was charged before (sent again after a lost reply); nothing was charged twice.
    applied: bool
    # The attempt's usage charged so far, this report included.
    cost_usd: float
    tokens_in: int
    tokens_out: int
    # USD left before the first limit holding the attempt; None: no limit holds it.
    remaining_usd: Optional[float]
    # Set when this report passed a limit: the attempt was stopped (report_cost raised BudgetExceeded).
    stopped: Optional[LimitReached]
    # Set when the attempt has spent 80 % (its DAG's budget_low_at) or more of a limit (none passed): time to wrap up.
    low: Optional[LimitReached] = None
    # Tokens (in + out) left under the task's max_tokens; None: none holds it.
    remaining_tokens: Optional[int] = None

    @classmethod
    def from_json(cls, a: dict[str, Any]) -> "UsageAnswer":
        def limit(x: Any) -> Optional[LimitReached]:
            return LimitReached(x["limit"], x.get("limitUsd"), x.get("spentUsd"), x.get("limitTokens"), x.get("spentTokens")) if x else None
        return cls(a["applied"], a["attempt"]["costUsd"], int(a["attempt"]["tokensIn"]), int(a["attempt"]["tokensOut"]),
                   a.get("remainingUsd"), limit(a.get("stopped")), limit(a.get("low")), a.get("remainingTokens"))


class BudgetExceeded(Exception):
    """Raised by ctx.report_cost when its report took the attempt past a limit. The server has charged the
    report and failed the attempt (class budget_exceeded): stop working on the task and let this unwind;
    the agent reports nothing more for it (it neither completes nor fails it)."""

    def __init__(self, answer: UsageAnswer) -> None:
        s = answer.stopped
        assert s is not None
        super().__init__(f"{s}; the attempt was stopped")
        self.answer, self.limit = answer, s


def usage_figures(usd: Any, tokens_in: Any, tokens_out: Any, model: Any) -> tuple[Optional[float], int, int]:
    """The report's figures, checked: ValueError naming the argument for a negative, non-finite or
    non-numeric cost, tokens that are not whole numbers from 0, or a model that is not a string. A cost of
    None is a cost unknown (no price for the model): sent as such, never as 0."""
    if usd is not None and (isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd) or usd < 0):
        raise ValueError(f"report_cost: usd {usd!r}: expected a finite number from 0")

    def whole(name: str, v: Any) -> int:
        integral = isinstance(v, int) or (isinstance(v, float) and v.is_integer())
        if isinstance(v, bool) or not integral or v < 0:
            raise ValueError(f"report_cost: {name} {v!r}: expected a whole number from 0")
        return int(v)

    if model is not None and not isinstance(model, str):
        raise ValueError(f"report_cost: model {model!r}: expected a model name (a string) or None")
    return None if usd is None else float(usd), whole("tokens_in", tokens_in), whole("tokens_out", tokens_out)


class AttemptUsage:
    """One attempt's usage reports: each sent at once, under a report_id of its own, sent again unchanged after
    a lost reply so that it is charged once."""

    def __init__(self, client: Client, task_id: str, fence: int, lost: threading.Event) -> None:
        self.client, self.task_id, self.fence = client, task_id, fence
        # Set when the task is no longer this attempt's: a report passed a limit, or the lease was lost.
        self.lost = lost
        # The answer of the report that passed a limit: the server failed the attempt (budget_exceeded).
        self.stopped_by: Optional[UsageAnswer] = None
        self._key_prefix = secrets.token_hex(6)
        self._seq = 0
        self._lock = threading.Lock()

    @property
    def stopped(self) -> Optional[LimitReached]:
        """The limit a report passed, when one did."""
        return self.stopped_by.stopped if self.stopped_by else None

    def report(self, usd: Optional[float], tokens_in: int, tokens_out: int, model: Optional[str]) -> Optional[UsageAnswer]:
        """Send one report (checked figures) and return its answer once durable; None for a report of nothing
        (nothing sent). Raises BudgetExceeded when it passed a limit, LeaseLost when the task is no longer ours."""
        if self.stopped_by is not None:
            raise BudgetExceeded(self.stopped_by)
        if self.lost.is_set():
            raise LeaseLost(409, "LEASE_LOST", "usage not reported: the task is no longer held by this attempt")
        if not usd and tokens_in == 0 and tokens_out == 0:
            return None
        with self._lock:
            self._seq += 1
            report_id = f"{self._key_prefix}:{self._seq}"
        body = {"fence": self.fence, "report_id": report_id, "cost_usd": usd, "tokens_in": tokens_in,
                "tokens_out": tokens_out, "model": model}
        try:
            answer = UsageAnswer.from_json(retried(
                lambda: self.client.held(f"/api/tasks/{self.task_id}/usage", {k: v for k, v in body.items() if v is not None or k == "cost_usd"}),
                f"{self.task_id}: usage report {report_id}"))
        except LeaseLost as e:
            # The server charges what an attempt of ours reports after it ended (the money was spent), and says so.
            fate = "charged to the attempt that ended" if e.details.get("lateCharged") else "not recorded"
            log.warning("%s: usage of %s USD %s: the lease was lost (%s); abandoning the task", self.task_id, usd, fate, e.message)
            self.lost.set()
            raise
        if answer.stopped is not None:
            # Known stopped before the loop sees the task lost, so that it says why and reports nothing.
            self.stopped_by = answer
            self.lost.set()
            error = BudgetExceeded(answer)
            log.warning("%s: %s", self.task_id, error)
            raise error
        return answer
