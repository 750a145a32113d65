ALTER TABLE "tenants" ADD COLUMN "max_running" integer;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "max_queued" integer;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "writer" "xid8";--> statement-breakpoint
CREATE INDEX "tasks_held_tenant_idx" ON "tasks" USING btree ("tenant_id") WHERE "tasks"."status" in ('claimed', 'running', 'validating');