ALTER TABLE "tasks" ADD COLUMN "validates_id" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "validates_fence" integer;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "validation_step" integer;--> statement-breakpoint
CREATE INDEX "tasks_validates_idx" ON "tasks" USING btree ("validates_id") WHERE "tasks"."validates_id" is not null;