-- A DAG's attempts are found through its tasks (attemptCountsForDag, retentionPreview): the index cost every
-- attempt an entry, 80 bytes of a flat task's WAL. During a rolling upgrade an older node's DAG view scans attempts.
DROP INDEX "attempts_dag_idx";