ALTER TABLE "dags" ADD COLUMN "rerun_of" text;--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "rerun_change" jsonb;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "reused_from" text;--> statement-breakpoint
CREATE INDEX "dags_rerun_of_idx" ON "dags" USING btree ("rerun_of") WHERE "dags"."rerun_of" is not null;