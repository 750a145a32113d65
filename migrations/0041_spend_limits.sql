ALTER TABLE "usage_reports" ALTER COLUMN "cost_usd" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "daily_budget_usd" numeric;--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "day_spent_usd" numeric DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "spend_day" date;--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "budget_low_at" real;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "max_tokens" bigint;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "daily_budget_usd" numeric;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "day_spent_usd" numeric DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "spend_day" date;--> statement-breakpoint
CREATE INDEX "dags_daily_budget_open_idx" ON "dags" USING btree ("id") WHERE "dags"."daily_budget_usd" is not null and "dags"."status" in ('running', 'blocked');--> statement-breakpoint
CREATE INDEX "usage_reports_unpriced_idx" ON "usage_reports" USING btree ("model") WHERE "usage_reports"."cost_usd" is null;