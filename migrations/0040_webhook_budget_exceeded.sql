-- Webhooks may subscribe to task.budget_exceeded: an attempt stopped at a spend limit while it ran
-- (src/webhooks/webhooks.ts WEBHOOK_EVENT_TYPES lists the same types).
DROP TRIGGER events_webhook_enqueue ON events;--> statement-breakpoint
CREATE TRIGGER events_webhook_enqueue AFTER INSERT ON events FOR EACH ROW
  WHEN (NEW.type IN ('task.dead_lettered', 'task.waiting', 'task.budget_exceeded', 'dag.blocked', 'dag.completed', 'dag.cancelled'))
  EXECUTE FUNCTION dagent_webhook_enqueue();
