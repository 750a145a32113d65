-- tasks churns fast (every claim and completion rewrites rows): analyze it after ~1% change
-- rather than the default 10%, so the claim's planner estimates stay close to the queue's real size.
ALTER TABLE "tasks" SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 500, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
