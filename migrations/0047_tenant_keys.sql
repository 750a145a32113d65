-- Idempotency keys are per tenant: one tenant's key never finds, nor collides with, another tenant's DAG or task.
CREATE UNIQUE INDEX "dags_tenant_idempotency_key_uq" ON "dags" USING btree ("tenant_id","idempotency_key") WHERE "dags"."idempotency_key" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_tenant_idempotency_key_uq" ON "tasks" USING btree ("tenant_id","idempotency_key") WHERE "tasks"."idempotency_key" is not null;--> statement-breakpoint
DROP INDEX "dags_idempotency_key_uq";--> statement-breakpoint
DROP INDEX "tasks_idempotency_key_uq";
