CREATE TABLE "capability_groups" (
	"cap_key" text PRIMARY KEY NOT NULL,
	"capabilities" text[] NOT NULL
);
--> statement-breakpoint
CREATE TABLE "task_type_durations" (
	"type" text PRIMARY KEY NOT NULL,
	"median_sec" double precision NOT NULL,
	"samples" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
DROP INDEX "tasks_ready_claim_idx";--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "reserved_usd" numeric(14, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "cap_key" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "reserved_usd" numeric(14, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "estimate_sec" double precision DEFAULT 60 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "cp_rank_sec" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "deadline_missed" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "reserved_usd" numeric(14, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "tasks_ready_group_idx" ON "tasks" USING btree ("cap_key","effective_priority","ready_at","id") WHERE "tasks"."status" = 'ready';--> statement-breakpoint
CREATE INDEX "tasks_deadline_watch_idx" ON "tasks" USING btree ("deadline") WHERE "tasks"."deadline" is not null and not "tasks"."deadline_missed";--> statement-breakpoint
UPDATE "tasks" SET "cap_key" = array_to_string("required_capabilities", ',') WHERE cardinality("required_capabilities") > 0;--> statement-breakpoint
INSERT INTO "capability_groups" ("cap_key", "capabilities") SELECT DISTINCT "cap_key", "required_capabilities" FROM "tasks" ON CONFLICT DO NOTHING;--> statement-breakpoint
INSERT INTO "capability_groups" ("cap_key", "capabilities") VALUES ('', '{}') ON CONFLICT DO NOTHING;
