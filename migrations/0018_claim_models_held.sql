ALTER TABLE "tasks" ADD COLUMN "models" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "capability_groups" ADD COLUMN "models" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
CREATE INDEX "tasks_held_idx" ON "tasks" USING btree ("claimed_by") WHERE "tasks"."status" in ('claimed', 'running', 'validating');