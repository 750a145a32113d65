ALTER TABLE "tenants" ADD COLUMN "max_usd_per_day" numeric;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "max_tokens_per_minute" integer;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "minute_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "minute_tokens" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "quota_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "tenants" ADD COLUMN "quota_reason" text;--> statement-breakpoint
CREATE INDEX "dags_tenant_spend_day_idx" ON "dags" USING btree ("tenant_id","spend_day");--> statement-breakpoint
CREATE INDEX "dags_tenant_open_idx" ON "dags" USING btree ("tenant_id") WHERE "dags"."status" in ('running', 'blocked');