DROP INDEX "tasks_status_idx";--> statement-breakpoint
DROP INDEX "tasks_dag_idx";--> statement-breakpoint
DROP INDEX "attempts_agent_idx";