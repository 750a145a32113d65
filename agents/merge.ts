import { defineAgent, mergeQueueRun, type MergeQueueOutput } from '../src/index.js';
import { commandRun } from './lib/command.js';

/**
 * The merge queue's agent: it claims merge tasks (`merge:` in a DAG file, which require the `merge` capability) and
 * lands their tasks' branches on the target, one at a time, in the repository on this machine (mergeQueueRun,
 * docs/coding-agents.md "The merge queue"). The queue's test command is the DAG author's, run at the root of a
 * worktree of each merge: give `merge` only to agents that serve trusted DAGs, on the machine that holds the repository.
 */
export default defineAgent({
  name: 'merge',
  capabilities: ['merge'],
  // One queue at a time per process: the queues of two DAGs on one repository take turns at the target anyway.
  maxConcurrent: 1,
  run(task, ctx): Promise<MergeQueueOutput> {
    return mergeQueueRun(task, ctx, { runTest: (test, cwd, signal) => commandRun({ command: test.command, env: test.env, timeoutSec: test.timeoutSec }, cwd, signal) });
  },
});
