ALTER TABLE "dags" ADD COLUMN "spawn_policy" jsonb;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "validates_agent" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "origin" text DEFAULT 'dag' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_origin_ck" CHECK (origin in ('dag', 'template', 'agent', 'validation'));