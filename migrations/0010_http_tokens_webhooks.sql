CREATE TABLE "api_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"role" text NOT NULL,
	"agent_id" text,
	"name" text,
	"token_hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_tokens_role_ck" CHECK ("api_tokens"."role" in ('admin', 'agent') and ("api_tokens"."role" = 'admin' or "api_tokens"."agent_id" is not null))
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"webhook_id" text NOT NULL,
	"event_id" bigint NOT NULL,
	"event_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_status" integer,
	"last_error" text,
	"history" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"delivered_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"events" text[] NOT NULL,
	"secret" text,
	"enabled" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_tokens_hash_uq" ON "api_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_event_uq" ON "webhook_deliveries" USING btree ("webhook_id","event_id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
-- Live views: every event row wakes the HTTP event stream (payload empty: NOTIFY is a hint, the events table is the truth).
-- Row-level on purpose: a statement-level trigger would fire for INSERT … SELECT of zero rows, which the completion statement runs on every batch.
CREATE FUNCTION dagent_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('dagent_events', '');
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION dagent_events_notify();
--> statement-breakpoint
-- Webhook outbox: a subscribed event gets one delivery row per webhook, in the transaction that wrote the event.
-- The list of types is WEBHOOK_EVENT_TYPES in src/engine/webhooks.ts.
CREATE FUNCTION dagent_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, payload)
  SELECT w.id, NEW.id, NEW.type, jsonb_build_object(
      'id', NEW.id, 'type', NEW.type, 'at', NEW.at, 'dag_id', NEW.dag_id, 'task_id', NEW.task_id, 'agent_id', NEW.agent_id,
      'data', NEW.data,
      'dag', (SELECT jsonb_build_object('name', d.name, 'status', d.status, 'blocked_reason', d.blocked_reason) FROM dags d WHERE d.id = NEW.dag_id),
      'task', (SELECT jsonb_build_object('key', t.key, 'type', t.type, 'status', t.status, 'attempts', t.attempts, 'last_error', t.last_error) FROM tasks t WHERE t.id = NEW.task_id))
  FROM webhooks w
  WHERE w.enabled AND NEW.type = ANY (w.events)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER events_webhook_enqueue AFTER INSERT ON events FOR EACH ROW
  WHEN (NEW.type IN ('task.dead_lettered', 'dag.blocked', 'dag.completed', 'dag.cancelled'))
  EXECUTE FUNCTION dagent_webhook_enqueue();
