CREATE TABLE "signals" (
	"key" text PRIMARY KEY NOT NULL,
	"payload" jsonb,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent_by" text,
	"received" integer DEFAULT 1 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" DROP CONSTRAINT "tasks_status_ck";--> statement-breakpoint
ALTER TABLE "api_tokens" DROP CONSTRAINT "api_tokens_role_ck";--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "wait_key" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "wait_timeout_sec" integer;--> statement-breakpoint
CREATE INDEX "tasks_waiting_idx" ON "tasks" USING btree ("wait_key") WHERE "tasks"."status" = 'waiting';--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_status_ck" CHECK (status in ('created', 'pending', 'ready', 'claimed', 'running', 'validating', 'waiting', 'completed', 'failed', 'retrying', 'dead_lettered', 'cancelled'));--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_role_ck" CHECK ("api_tokens"."role" in ('admin', 'submit', 'read', 'signal', 'agent') and (("api_tokens"."role" = 'agent') = ("api_tokens"."agent_id" is not null)));