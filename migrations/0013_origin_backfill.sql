-- Tasks that existed before origins were recorded: validation tasks were made by the engine,
-- spawned subtasks (parent_id set) by agents, without templates; everything else came from a DAG.
UPDATE "tasks" SET "origin" = 'validation' WHERE "validates_id" IS NOT NULL;--> statement-breakpoint
UPDATE "tasks" SET "origin" = 'agent' WHERE "parent_id" IS NOT NULL AND "validates_id" IS NULL;--> statement-breakpoint
UPDATE "tasks" v SET "validates_agent" = a."agent_id" FROM "attempts" a WHERE a."task_id" = v."validates_id" AND a."fence" = v."validates_fence" AND v."validates_agent" IS NULL;
