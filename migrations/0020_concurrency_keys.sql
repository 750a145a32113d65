CREATE TABLE "concurrency_keys" (
	"key" text PRIMARY KEY NOT NULL,
	"lim" integer NOT NULL,
	"held" integer DEFAULT 0 NOT NULL,
	"writer" "xid8"
);
--> statement-breakpoint
CREATE TABLE "concurrency_releases" (
	"key" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "conc_key" text;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "conc_limit" integer;--> statement-breakpoint
ALTER TABLE "agents" ADD COLUMN "claim_writer" "xid8";--> statement-breakpoint
CREATE INDEX "concurrency_keys_in_use_idx" ON "concurrency_keys" USING btree ("key") WHERE "concurrency_keys"."held" > 0;--> statement-breakpoint
CREATE INDEX "concurrency_releases_key_idx" ON "concurrency_releases" USING btree ("key");--> statement-breakpoint
CREATE INDEX "tasks_ready_keyed_idx" ON "tasks" USING btree ("conc_key") WHERE "tasks"."status" = 'ready' and "tasks"."conc_key" is not null;