-- A task that waits for a signal (wait_key) never sits in READY: wherever a statement would make it READY
-- (unblocked, promoted, retried, retried from the dead-letter queue), this makes it WAITING instead, as if claimed
-- by no agent: a new fence and attempt, claimed now, its wait_for timeout as its lease; then a task.waiting event.
-- The statement's RETURNING sees `waiting`, so nothing counts it as READY work or NOTIFYs agents of it.
-- The function keeps the search_path it was created under (dagent's schema).
CREATE FUNCTION dagent_task_await() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  NEW.status := 'waiting';
  NEW.fence := NEW.fence + 1;
  NEW.attempts := NEW.attempts + 1;
  NEW.claimed_by := NULL;
  NEW.claimed_at := now();
  NEW.started_at := now();
  NEW.run_at := NULL;
  NEW.lease_expires_at := CASE WHEN NEW.wait_timeout_sec IS NULL THEN NULL ELSE now() + make_interval(secs => NEW.wait_timeout_sec) END;
  RETURN NEW;
END $$;--> statement-breakpoint
CREATE TRIGGER tasks_await BEFORE UPDATE OF status ON tasks FOR EACH ROW
  WHEN (NEW.status = 'ready' AND NEW.wait_key IS NOT NULL)
  EXECUTE FUNCTION dagent_task_await();
--> statement-breakpoint
-- The event, after the row changed: a webhook's payload then reads the task as WAITING.
CREATE FUNCTION dagent_task_waiting_event() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  -- An approval step's validation task (wait_key approval/<task>) waits for a person: say whose output, not a key.
  INSERT INTO events (type, dag_id, task_id, data)
    VALUES ('task.waiting', NEW.dag_id, NEW.id, CASE WHEN starts_with(NEW.wait_key, 'approval/')
      THEN jsonb_build_object('approval_of', NEW.validates_id, 'step', NEW.validation_step, 'attempt', NEW.attempts, 'timeout_sec', NEW.wait_timeout_sec)
      ELSE jsonb_build_object('signal', NEW.wait_key, 'attempt', NEW.attempts, 'timeout_sec', NEW.wait_timeout_sec) END);
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER tasks_waiting_event AFTER UPDATE OF status ON tasks FOR EACH ROW
  WHEN (NEW.status = 'waiting' AND OLD.status <> 'waiting')
  EXECUTE FUNCTION dagent_task_waiting_event();--> statement-breakpoint
-- Webhooks may subscribe to task.waiting (src/engine/webhooks.ts WEBHOOK_EVENT_TYPES lists the same types).
DROP TRIGGER events_webhook_enqueue ON events;--> statement-breakpoint
CREATE TRIGGER events_webhook_enqueue AFTER INSERT ON events FOR EACH ROW
  WHEN (NEW.type IN ('task.dead_lettered', 'task.waiting', 'dag.blocked', 'dag.completed', 'dag.cancelled'))
  EXECUTE FUNCTION dagent_webhook_enqueue();
