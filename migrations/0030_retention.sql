ALTER TABLE "dags" ADD COLUMN "pruned_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "dags_finished_idx" ON "dags" USING btree ("completed_at") WHERE "dags"."status" in ('completed', 'cancelled') and "dags"."pruned_at" is null;--> statement-breakpoint
CREATE INDEX "dags_pruning_idx" ON "dags" USING btree ("id") WHERE "dags"."pruned_at" is not null;--> statement-breakpoint
CREATE INDEX "events_dagless_at_idx" ON "events" USING btree ("at") WHERE "events"."dag_id" is null;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_done_idx" ON "webhook_deliveries" USING btree ("created_at") WHERE "webhook_deliveries"."status" <> 'pending';