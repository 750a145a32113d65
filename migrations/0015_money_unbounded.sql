-- Money columns lose their numeric(14,6) bound: a sum of many reports could overflow it, and every later
-- report on that DAG or agent would fail. Each report is bounded instead (LIMITS.reportCostUsd).
ALTER TABLE "dags" ALTER COLUMN "budget_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "dags" ALTER COLUMN "spent_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "dags" ALTER COLUMN "reserved_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "tasks" ALTER COLUMN "reserved_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "tasks" ALTER COLUMN "max_cost_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "tasks" ALTER COLUMN "cost_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "attempts" ALTER COLUMN "cost_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "agents" ALTER COLUMN "budget_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "agents" ALTER COLUMN "spent_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "agents" ALTER COLUMN "reserved_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "dead_letters" ALTER COLUMN "total_cost_usd" SET DATA TYPE numeric;--> statement-breakpoint
ALTER TABLE "api_tokens" ALTER COLUMN "grant_budget_usd" SET DATA TYPE numeric;