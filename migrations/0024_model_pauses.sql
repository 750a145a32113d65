CREATE TABLE "model_pauses" (
	"model" text PRIMARY KEY NOT NULL,
	"until" timestamp with time zone NOT NULL,
	"reason" text,
	"task_id" text,
	"hits" integer DEFAULT 1 NOT NULL
);
