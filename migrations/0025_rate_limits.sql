CREATE TABLE "rate_limits" (
	"key" text PRIMARY KEY NOT NULL,
	"requests" integer,
	"tokens" integer,
	"window_sec" integer DEFAULT 60 NOT NULL,
	"default_tokens" integer DEFAULT 0 NOT NULL,
	"writer" "xid8",
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "rate_usage" (
	"key" text NOT NULL,
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"tokens_reserved" integer NOT NULL,
	"tokens_used" integer,
	CONSTRAINT "rate_usage_pkey" PRIMARY KEY("task_id","fence","key")
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "estimated_tokens" integer;--> statement-breakpoint
CREATE INDEX "rate_usage_window_idx" ON "rate_usage" USING btree ("key","at");