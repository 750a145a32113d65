CREATE TABLE "schedules" (
	"name" text PRIMARY KEY NOT NULL,
	"dag_name" text NOT NULL,
	"source_file" text,
	"source" text NOT NULL,
	"cron" text NOT NULL,
	"timezone" text DEFAULT 'UTC' NOT NULL,
	"catchup" text DEFAULT 'latest' NOT NULL,
	"catchup_limit" integer DEFAULT 10 NOT NULL,
	"overlap" text DEFAULT 'allow' NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"params" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"next_fire_at" timestamp with time zone NOT NULL,
	"last_fire_at" timestamp with time zone,
	"last_dag_id" text,
	"fires" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"missed" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "dags" ADD COLUMN "scheduled_at" timestamp with time zone;