CREATE TABLE "task_step_replays" (
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"name" text NOT NULL,
	"attempt" integer NOT NULL,
	"recorded_fence" integer NOT NULL,
	"cost_usd" numeric DEFAULT 0 NOT NULL,
	"replayed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_step_replays_pkey" PRIMARY KEY("task_id","fence","name")
);
--> statement-breakpoint
ALTER TABLE "task_step_replays" ADD CONSTRAINT "task_step_replays_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;