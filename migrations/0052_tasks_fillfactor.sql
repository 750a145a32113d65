-- Room on each page of tasks for the versions a claim and a completion write, so they stay on the row's page:
-- PostgreSQL then logs only the changed part of the row, not the whole of it, and no lock record first (a version
-- written to another page locks the old one in the WAL before it moves). Flat no-op tasks, WAL per task
-- (pg_walinspect, docs/benchmarks.md "What a task writes"): 1,965 bytes at 100, 1,839 at 70. New pages only:
-- rows already written keep their pages until updated.
ALTER TABLE "tasks" SET (fillfactor = 70);
