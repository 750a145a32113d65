ALTER TABLE "api_tokens" DROP CONSTRAINT "api_tokens_role_ck";--> statement-breakpoint
ALTER TABLE "api_tokens" ADD COLUMN "grant_capabilities" text[];--> statement-breakpoint
ALTER TABLE "api_tokens" ADD COLUMN "grant_validators" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "api_tokens" ADD COLUMN "grant_budget_usd" numeric(14, 6);--> statement-breakpoint
ALTER TABLE "api_tokens" ADD COLUMN "grant_max_concurrent" integer;--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_role_ck" CHECK ("api_tokens"."role" in ('admin', 'submit', 'read', 'agent') and (("api_tokens"."role" = 'agent') = ("api_tokens"."agent_id" is not null)));