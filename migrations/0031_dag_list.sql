ALTER TABLE "dags" ADD COLUMN "tags" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
CREATE INDEX "dags_created_idx" ON "dags" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "dags_tags_idx" ON "dags" USING gin ("tags");--> statement-breakpoint
-- DAGs submitted before: their tasks' tags, as a submit now records them.
UPDATE "dags" d SET "tags" = sub.tags FROM (
  SELECT t.dag_id, array_agg(DISTINCT tag ORDER BY tag) AS tags FROM "tasks" t, unnest(t.tags) AS tag GROUP BY t.dag_id
) sub WHERE sub.dag_id = d.id;
