CREATE TABLE "usage_reports" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"attempt" integer NOT NULL,
	"dag_id" text NOT NULL,
	"agent_id" text,
	"token_id" text,
	"report_key" text NOT NULL,
	"model" text,
	"cost_usd" numeric DEFAULT 0 NOT NULL,
	"tokens_in" bigint DEFAULT 0 NOT NULL,
	"tokens_out" bigint DEFAULT 0 NOT NULL,
	"cached_read_tokens" bigint DEFAULT 0 NOT NULL,
	"cache_write_tokens" bigint DEFAULT 0 NOT NULL,
	"reported_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "usage_fence" integer;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "attempt_cost_usd" numeric DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "attempt_tokens_in" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "attempt_tokens_out" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_reports" ADD CONSTRAINT "usage_reports_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "usage_reports_key_idx" ON "usage_reports" USING btree ("task_id","fence","report_key");--> statement-breakpoint
CREATE INDEX "usage_reports_dag_idx" ON "usage_reports" USING btree ("dag_id","reported_at");