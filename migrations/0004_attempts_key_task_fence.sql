DROP INDEX "attempts_task_fence_uq";--> statement-breakpoint
ALTER TABLE "attempts" ADD CONSTRAINT "attempts_pkey" PRIMARY KEY("task_id","fence");