CREATE TABLE "tenant_served" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"tokens" bigint NOT NULL,
	"tasks" integer NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tenants" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text,
	"weight" real DEFAULT 1 NOT NULL,
	"vtime" double precision DEFAULT 0 NOT NULL,
	"served_tokens" bigint DEFAULT 0 NOT NULL,
	"served_tasks" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tenants_id_ck" CHECK ("tenants"."id" ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
	CONSTRAINT "tenants_weight_ck" CHECK ("tenants"."weight" > 0 and "tenants"."weight" <= 1000)
);
--> statement-breakpoint
INSERT INTO "tenants" ("id", "name") VALUES ('default', 'the default tenant');--> statement-breakpoint
ALTER TABLE "capability_groups" ADD COLUMN "tenant_id" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "capability_groups" DROP CONSTRAINT "capability_groups_pkey";--> statement-breakpoint
ALTER TABLE "capability_groups" ADD CONSTRAINT "capability_groups_pk" PRIMARY KEY("cap_key","tenant_id");--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "tenant_id" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "tenant_id" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "tenants" text[];--> statement-breakpoint
ALTER TABLE "schedules" ADD COLUMN "tenant_id" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
CREATE INDEX "tenant_served_tenant_idx" ON "tenant_served" USING btree ("tenant_id");--> statement-breakpoint
ALTER TABLE "dags" ADD CONSTRAINT "dags_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "dags_tenant_created_idx" ON "dags" USING btree ("tenant_id","created_at","id");--> statement-breakpoint
DROP INDEX "tasks_ready_group_idx";--> statement-breakpoint
CREATE INDEX "tasks_ready_group_idx" ON "tasks" USING btree ("cap_key","tenant_id","effective_priority","ready_at","id") WHERE "tasks"."status" = 'ready';
