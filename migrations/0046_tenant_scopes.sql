-- Tokens scoped to tenants (null: every tenant): another tenant's objects do not exist for them.
ALTER TABLE "api_tokens" ADD COLUMN "tenants" text[];--> statement-breakpoint
-- Signal keys are per tenant: a signal reaches only its tenant's waiting tasks.
ALTER TABLE "signals" ADD COLUMN "tenant_id" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "signals" DROP CONSTRAINT "signals_pkey";--> statement-breakpoint
ALTER TABLE "signals" ADD CONSTRAINT "signals_tenant_id_key_pk" PRIMARY KEY("tenant_id","key");--> statement-breakpoint
ALTER TABLE "signals" ADD CONSTRAINT "signals_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
-- A webhook of one tenant gets only that tenant's events; null: every tenant's.
ALTER TABLE "webhooks" ADD COLUMN "tenant_id" text;--> statement-breakpoint
ALTER TABLE "webhooks" ADD CONSTRAINT "webhooks_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
-- The outbox trigger's function, as in 0010 but for a tenant's webhooks only its tenant's events (an event's tenant is its DAG's).
CREATE OR REPLACE FUNCTION dagent_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  event_tenant text := (SELECT d.tenant_id FROM dags d WHERE d.id = NEW.dag_id);
BEGIN
  INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, payload)
  SELECT w.id, NEW.id, NEW.type, jsonb_build_object(
      'id', NEW.id, 'type', NEW.type, 'at', NEW.at, 'dag_id', NEW.dag_id, 'task_id', NEW.task_id, 'agent_id', NEW.agent_id,
      'data', NEW.data,
      'dag', (SELECT jsonb_build_object('name', d.name, 'status', d.status, 'blocked_reason', d.blocked_reason) FROM dags d WHERE d.id = NEW.dag_id),
      'task', (SELECT jsonb_build_object('key', t.key, 'type', t.type, 'status', t.status, 'attempts', t.attempts, 'last_error', t.last_error) FROM tasks t WHERE t.id = NEW.task_id))
  FROM webhooks w
  WHERE w.enabled AND NEW.type = ANY (w.events) AND (w.tenant_id IS NULL OR w.tenant_id = event_tenant)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
