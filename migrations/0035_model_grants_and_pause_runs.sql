ALTER TABLE "api_tokens" ADD COLUMN "grant_models" text[];--> statement-breakpoint
ALTER TABLE "model_pauses" ADD COLUMN "started_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "model_pauses" ADD COLUMN "reporters" text[] DEFAULT '{}'::text[] NOT NULL;