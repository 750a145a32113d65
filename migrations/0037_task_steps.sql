CREATE TABLE "task_steps" (
	"task_id" text NOT NULL,
	"dag_id" text NOT NULL,
	"name" text NOT NULL,
	"scope" text NOT NULL,
	"attempt" integer NOT NULL,
	"fence" integer NOT NULL,
	"result" jsonb,
	"size_bytes" integer NOT NULL,
	"duration_ms" integer,
	"cost_usd" numeric DEFAULT 0 NOT NULL,
	"tokens_in" bigint DEFAULT 0 NOT NULL,
	"tokens_out" bigint DEFAULT 0 NOT NULL,
	"model" text,
	"started_at" timestamp with time zone,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_steps_pkey" PRIMARY KEY("task_id","fence","name"),
	CONSTRAINT "task_steps_scope_ck" CHECK ("task_steps"."scope" in ('task', 'attempt'))
);
--> statement-breakpoint
ALTER TABLE "attempts" ADD COLUMN "replayed_cost_usd" numeric DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "task_steps" ADD CONSTRAINT "task_steps_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "task_steps_task_name_idx" ON "task_steps" USING btree ("task_id","name") WHERE "task_steps"."scope" = 'task';