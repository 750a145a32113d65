-- Tasks that name models from before the claim read them: their accepted models (models and
-- fallback models, sorted, distinct) move into tasks.models and into their claim group's key, as
-- src/db/queries/capability-groups.ts claimGroupKey builds it; finished tasks are left as they are.
UPDATE "tasks" t SET "models" = m."models", "cap_key" = t."cap_key" || ' models=' || array_to_string(m."models", ',')
FROM (
  SELECT "id", array_agg(DISTINCT name COLLATE "C" ORDER BY name COLLATE "C") AS "models"
  FROM "tasks", jsonb_array_elements_text(coalesce("spec"->'models', '[]'::jsonb) || coalesce("spec"->'fallbackModels', '[]'::jsonb)) AS name
  WHERE "status" NOT IN ('completed', 'cancelled')
  GROUP BY "id"
) m
WHERE t."id" = m."id";--> statement-breakpoint
INSERT INTO "capability_groups" ("cap_key", "capabilities", "models")
SELECT DISTINCT "cap_key", "required_capabilities", "models" FROM "tasks" WHERE cardinality("models") > 0
ON CONFLICT DO NOTHING;
