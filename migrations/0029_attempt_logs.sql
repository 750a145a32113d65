CREATE TABLE "attempt_log_stats" (
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"attempt" integer NOT NULL,
	"lines" integer DEFAULT 0 NOT NULL,
	"bytes" integer DEFAULT 0 NOT NULL,
	"dropped" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "attempt_log_stats_pkey" PRIMARY KEY("task_id","fence")
);
--> statement-breakpoint
CREATE TABLE "attempt_logs" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"level" text NOT NULL,
	"message" text NOT NULL,
	"fields" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "attempt_logs_task_idx" ON "attempt_logs" USING btree ("task_id","fence","id");