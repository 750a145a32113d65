import type { Command } from 'commander';
import { resolver, withDatabase, type CommandContext } from './context.js';
import { jsonOptionRead } from './json-option.js';
import { Output } from './output.js';

/** `dagent approvals`, `dagent approve`, `dagent reject`: a person's verdict on an approval step. */
export function approvalCommands(program: Command, ctx: CommandContext): void {
  program
    .command('approvals')
    .description('list the approval steps waiting for a person, oldest first')
    .option('--dag <id>', 'only this DAG\'s')
    .option('--json', 'machine-readable output')
    .action(async (opts: { dag?: string; json?: boolean }) => {
      const { approvalList } = await import('../engine/waits/approvals.js');
      const rows = await withDatabase(ctx, (d) => approvalList(d.db, { dagId: opts.dag }));
      const out = new Output(ctx.io, !!opts.json);
      out.result({ approvals: rows }, () => {
        if (rows.length === 0) return out.line('no approval is waiting');
        for (const a of rows) {
          const due = a.expiresAt ? `, decide by ${new Date(a.expiresAt).toISOString()}` : '';
          out.line(`${a.taskId}  ${a.dagName}/${a.taskKey}  ${a.step === null ? 'approval task' : `step ${a.step + 1}`}${due}${a.prompt ? `: ${a.prompt}` : ''}`);
          out.line(`    ${a.step === null ? 'upstream outputs' : 'output'}: ${preview(a.output)}`);
        }
      });
    });

  program
    .command('approve')
    .description('approve the output waiting on a task\'s approval step (optionally replacing it first)')
    .argument('<task-id>', 'the task whose output is approved (or the approval\'s own task)')
    .option('--comment <text>', 'recorded with the decision')
    .option('--output <json>', 'replace the output with this JSON before approving (where the step allows editing)')
    .option('--output-file <file>', 'replace the output with this JSON file (- for standard input)')
    .option('--json', 'machine-readable output')
    .action(async (taskId: string, opts: { comment?: string; output?: string; outputFile?: string; json?: boolean }) => {
      const output = jsonOptionRead('output', opts.output, opts.outputFile);
      const { taskApprove } = await import('../engine/waits/approvals.js');
      const r = await withDatabase(ctx, (d) => taskApprove(d.db, taskId, { by: resolver(ctx), comment: opts.comment, ...(output.given ? { output: output.value } : {}) }, { log: ctx.log }));
      const out = new Output(ctx.io, !!opts.json);
      out.result(r, () => out.line(`${r.taskId}: approved${output.given ? ' (output replaced)' : ''}; the task is ${r.outcome.status}`));
    });

  program
    .command('reject')
    .description('reject the output waiting on a task\'s approval step: the attempt fails with the comment, which its retry reads')
    .argument('<task-id>', 'the task whose output is rejected (or the approval\'s own task)')
    .requiredOption('--comment <text>', 'what is wrong: the retry\'s agent is told')
    .option('--json', 'machine-readable output')
    .action(async (taskId: string, opts: { comment: string; json?: boolean }) => {
      const { taskReject } = await import('../engine/waits/approvals.js');
      const r = await withDatabase(ctx, (d) => taskReject(d.db, taskId, { by: resolver(ctx), comment: opts.comment }, { log: ctx.log }));
      const out = new Output(ctx.io, !!opts.json);
      const next = r.outcome.status === 'rejected' ? r.outcome.failure.status : r.outcome.status;
      out.result(r, () => out.line(`${r.taskId}: rejected; the task is ${next === 'dead_lettered' ? 'dead-lettered (no attempts left)' : `${next} (it runs again with your comment)`}`));
    });
}

function preview(v: unknown): string {
  const s = JSON.stringify(v) ?? 'null';
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
}
