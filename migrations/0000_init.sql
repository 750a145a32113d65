CREATE TABLE "dags" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"title" text,
	"status" text DEFAULT 'running' NOT NULL,
	"blocked_reason" text,
	"params" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"spec" jsonb NOT NULL,
	"source_file" text,
	"budget_usd" numeric(14, 6),
	"spent_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"tasks_total" integer DEFAULT 0 NOT NULL,
	"tasks_open" integer DEFAULT 0 NOT NULL,
	"idempotency_key" text,
	"created_by" text DEFAULT 'api' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "dags_status_ck" CHECK (status in ('running', 'completed', 'blocked', 'cancelled'))
);
--> statement-breakpoint
CREATE TABLE "tasks" (
	"id" text PRIMARY KEY NOT NULL,
	"dag_id" text NOT NULL,
	"key" text NOT NULL,
	"parent_id" text,
	"type" text NOT NULL,
	"title" text,
	"status" text NOT NULL,
	"spec" jsonb NOT NULL,
	"context_keys" text[] DEFAULT '{}'::text[] NOT NULL,
	"required_capabilities" text[] DEFAULT '{}'::text[] NOT NULL,
	"max_cost_usd" numeric(14, 6),
	"max_duration_sec" integer,
	"priority" smallint DEFAULT 50 NOT NULL,
	"boost_per_minute" real DEFAULT 0 NOT NULL,
	"effective_priority" double precision DEFAULT 50 NOT NULL,
	"deadline" timestamp with time zone,
	"run_at" timestamp with time zone,
	"deps_remaining" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 3 NOT NULL,
	"attempts_reset_fence" integer DEFAULT 0 NOT NULL,
	"retry_policy" jsonb NOT NULL,
	"idempotency_key" text,
	"output_spec" jsonb,
	"output" jsonb,
	"tags" text[] DEFAULT '{}'::text[] NOT NULL,
	"claimed_by" text,
	"fence" integer DEFAULT 0 NOT NULL,
	"claimed_at" timestamp with time zone,
	"started_at" timestamp with time zone,
	"lease_expires_at" timestamp with time zone,
	"heartbeat_at" timestamp with time zone,
	"progress" real,
	"progress_message" text,
	"cost_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"tokens_in" bigint DEFAULT 0 NOT NULL,
	"tokens_out" bigint DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ready_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "tasks_status_ck" CHECK (status in ('created', 'pending', 'ready', 'claimed', 'running', 'validating', 'completed', 'failed', 'retrying', 'dead_lettered', 'cancelled')),
	CONSTRAINT "tasks_priority_ck" CHECK ("tasks"."priority" between 0 and 100)
);
--> statement-breakpoint
CREATE TABLE "edges" (
	"dag_id" text NOT NULL,
	"upstream_id" text NOT NULL,
	"downstream_id" text NOT NULL,
	CONSTRAINT "edges_upstream_id_downstream_id_pk" PRIMARY KEY("upstream_id","downstream_id")
);
--> statement-breakpoint
CREATE TABLE "attempts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"dag_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"fence" integer NOT NULL,
	"agent_id" text,
	"outcome" text NOT NULL,
	"error_class" text,
	"error_message" text,
	"started_at" timestamp with time zone NOT NULL,
	"ended_at" timestamp with time zone DEFAULT now() NOT NULL,
	"duration_ms" integer NOT NULL,
	"cost_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"tokens_in" bigint DEFAULT 0 NOT NULL,
	"tokens_out" bigint DEFAULT 0 NOT NULL,
	"model" text,
	"details" jsonb
);
--> statement-breakpoint
CREATE TABLE "agents" (
	"id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"capabilities" text[] DEFAULT '{}'::text[] NOT NULL,
	"models" text[] DEFAULT '{}'::text[] NOT NULL,
	"max_concurrent" integer DEFAULT 1 NOT NULL,
	"budget_usd" numeric(14, 6),
	"spent_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"registered_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "dead_letters" (
	"id" text PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"dag_id" text NOT NULL,
	"reason" text NOT NULL,
	"error_class" text,
	"poison_pill" boolean DEFAULT false NOT NULL,
	"attempts" integer NOT NULL,
	"history" jsonb NOT NULL,
	"total_cost_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolution" text,
	"resolved_at" timestamp with time zone,
	"resolved_by" text,
	"resolved_note" text
);
--> statement-breakpoint
CREATE TABLE "events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"type" text NOT NULL,
	"dag_id" text,
	"task_id" text,
	"agent_id" text,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "maintenance_gates" (
	"name" text PRIMARY KEY NOT NULL,
	"ran_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_dag_id_dags_id_fk" FOREIGN KEY ("dag_id") REFERENCES "dags"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "edges" ADD CONSTRAINT "edges_dag_id_dags_id_fk" FOREIGN KEY ("dag_id") REFERENCES "dags"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "edges" ADD CONSTRAINT "edges_upstream_id_tasks_id_fk" FOREIGN KEY ("upstream_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "edges" ADD CONSTRAINT "edges_downstream_id_tasks_id_fk" FOREIGN KEY ("downstream_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "dags_idempotency_key_uq" ON "dags" USING btree ("idempotency_key") WHERE "dags"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "dags_status_idx" ON "dags" USING btree ("status","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_dag_key_uq" ON "tasks" USING btree ("dag_id","key");--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_idempotency_key_uq" ON "tasks" USING btree ("idempotency_key") WHERE "tasks"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "tasks_ready_claim_idx" ON "tasks" USING btree ("effective_priority","ready_at","id") WHERE "tasks"."status" = 'ready';--> statement-breakpoint
CREATE INDEX "tasks_lease_idx" ON "tasks" USING btree ("lease_expires_at") WHERE "tasks"."status" in ('claimed', 'running');--> statement-breakpoint
CREATE INDEX "tasks_run_at_idx" ON "tasks" USING btree ("run_at") WHERE "tasks"."status" in ('retrying', 'pending');--> statement-breakpoint
CREATE INDEX "tasks_status_idx" ON "tasks" USING btree ("status");--> statement-breakpoint
CREATE INDEX "tasks_dag_idx" ON "tasks" USING btree ("dag_id");--> statement-breakpoint
CREATE INDEX "tasks_parent_idx" ON "tasks" USING btree ("parent_id") WHERE "tasks"."parent_id" is not null;--> statement-breakpoint
CREATE INDEX "edges_downstream_idx" ON "edges" USING btree ("downstream_id");--> statement-breakpoint
CREATE INDEX "edges_dag_idx" ON "edges" USING btree ("dag_id");--> statement-breakpoint
CREATE UNIQUE INDEX "attempts_task_fence_uq" ON "attempts" USING btree ("task_id","fence");--> statement-breakpoint
CREATE INDEX "attempts_dag_idx" ON "attempts" USING btree ("dag_id");--> statement-breakpoint
CREATE INDEX "attempts_agent_idx" ON "attempts" USING btree ("agent_id");--> statement-breakpoint
CREATE UNIQUE INDEX "dead_letters_open_task_uq" ON "dead_letters" USING btree ("task_id") WHERE "dead_letters"."resolution" is null;--> statement-breakpoint
CREATE INDEX "dead_letters_dag_idx" ON "dead_letters" USING btree ("dag_id");--> statement-breakpoint
CREATE INDEX "dead_letters_created_idx" ON "dead_letters" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "events_task_idx" ON "events" USING btree ("task_id","id");--> statement-breakpoint
CREATE INDEX "events_dag_idx" ON "events" USING btree ("dag_id","id");