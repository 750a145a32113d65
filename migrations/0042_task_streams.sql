CREATE TABLE "task_stream_chunks" (
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"name" text NOT NULL,
	"seq" integer NOT NULL,
	"kind" text NOT NULL,
	"data" text NOT NULL,
	"written_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_stream_chunks_pkey" PRIMARY KEY("task_id","fence","name","seq"),
	CONSTRAINT "task_stream_chunks_kind_ck" CHECK ("task_stream_chunks"."kind" in ('text', 'json'))
);
--> statement-breakpoint
CREATE TABLE "task_streams" (
	"task_id" text NOT NULL,
	"fence" integer NOT NULL,
	"name" text NOT NULL,
	"attempt" integer NOT NULL,
	"chunks" integer DEFAULT 0 NOT NULL,
	"bytes" bigint DEFAULT 0 NOT NULL,
	"end_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "task_streams_pkey" PRIMARY KEY("task_id","fence","name"),
	CONSTRAINT "task_streams_end_ck" CHECK ("task_streams"."end_reason" in ('ended', 'truncated'))
);
--> statement-breakpoint
ALTER TABLE "task_stream_chunks" ADD CONSTRAINT "task_stream_chunks_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "task_streams" ADD CONSTRAINT "task_streams_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE cascade ON UPDATE no action;