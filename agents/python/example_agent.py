"""Example dagent agent in Python: counts words.

Handles tasks that require the capability `py-wordcount`:

- type `wordcount`: counts the words of `spec.input.text`, else of `spec.prompt`.
  With `spec.input.chunks` (a list of texts) it spawns one `wordcount` subtask
  per chunk, waits for them, and sums their counts when it runs again.
- type `wordcount-sum`: sums the `words` of its upstream outputs (`inputs`,
  from the task's `spec.context`).

For demonstration, `spec.input.raise` makes the handler raise with that message
(the task fails as `error`), `spec.input.raise_once` raises on the first attempt only (the retry
answers with the messages of the attempts before it, from `task.previous_attempts`) and `spec.input.sleep_sec` makes it work slowly,
reporting progress.

    DAGENT_URL=http://127.0.0.1:7070 DAGENT_TOKEN=... python3 example_agent.py --id py-1
"""

from __future__ import annotations

import sys
import time
from typing import Any

from dagent_agent import Agent, Task, TaskContext

CAPABILITY = "py-wordcount"


def count(value: Any) -> int:
    """Words in an upstream output: a number, or an object with `words`."""
    if isinstance(value, dict):
        value = value.get("words", 0)
    return value if isinstance(value, int) else 0


def handle(task: Task, ctx: TaskContext) -> dict[str, Any]:
    data = task.spec.get("input") or {}
    if "raise" in data:
        raise ValueError(data["raise"])
    if "raise_once" in data:
        # A retry sees why the attempts before it failed (task.previous_attempts): an LLM agent would put it in its prompt.
        if not task.previous_attempts:
            raise ValueError(data["raise_once"])
        return {"recovered_from": [p.get("errorMessage") for p in task.previous_attempts], "attempt": task.attempt}
    if data.get("sleep_sec"):
        # Progress is optional: the agent heartbeats the lease in the background meanwhile.
        ctx.heartbeat(progress=0.0, message=f"sleeping {data['sleep_sec']} s")
        time.sleep(data["sleep_sec"])

    if task.type == "wordcount-sum":
        parts = {ref: count(value) for ref, value in task.inputs.items()}
        return {"words": sum(parts.values()), "parts": parts, "inputs": task.inputs}

    chunks = data.get("chunks")
    if chunks:
        # A resumable step: the same keys every run. The first run ends here
        # (Waiting); the run after the subtasks completed gets their outputs.
        # The DAG declares the `chunk` template (type, capabilities); the agent fills in the text.
        children = ctx.spawn([
            {"key": f"chunk-{i}", "template": "chunk", "spec": {"input": {"text": text}}}
            for i, text in enumerate(chunks)
        ], wait=True)
        return {"words": sum(count(c.get("output")) for c in children), "chunks": len(children)}

    text = data.get("text", task.spec.get("prompt") or "")
    # Stored with this attempt: `dagent logs <task>` and the dashboard's task page show it.
    ctx.log(f"counted {len(text.split())} words", chars=len(text), traceparent=task.traceparent)
    return {"words": len(text.split()), "chars": len(text)}


if __name__ == "__main__":
    sys.exit(Agent.from_args(handle, agent_type="py-wordcount", capabilities=[CAPABILITY]).run())
