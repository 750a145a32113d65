import type { Command } from 'commander';
import { z } from 'zod';
import { dagFileSchema, templateFileSchema } from '../dag/file-schema.js';
import { dagFileLoad, EXTENSION_PREFIX } from '../dag/load.js';
import type { DagSpec } from '../dag/spec.js';
import { DagNotCompletedError, DagValidationError, InvalidInputError, type SpecProblem } from '../errors.js';
import { dagSubmitOrSchedule } from '../engine/ops/submit-or-schedule.js';
import { configFromEnv } from '../config/index.js';
import { withDatabase, type CommandContext } from './context.js';
import { Output } from './output.js';
import { terminalSafe } from '../terminal-text.js';

/** `--param k=v` collected into an object. */
export function paramCollect(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const i = value.indexOf('=');
  if (i <= 0) throw new InvalidInputError(`--param ${value}: expected NAME=VALUE`);
  return { ...previous, [value.slice(0, i)]: value.slice(i + 1) };
}

/**
 * Load every file; report every problem of every file at once, so one run shows
 * them all. With several files, a --param must be declared by at least one of them.
 */
export async function dagFilesLoad(files: string[], params: Record<string, string>, roots: readonly string[] = []): Promise<DagSpec[]> {
  const specs: DagSpec[] = [];
  const problems: SpecProblem[] = [];
  for (const f of files) {
    try {
      specs.push(await dagFileLoad(f, { params, ignoreUndeclaredParams: files.length > 1, roots }));
    } catch (e) {
      if (e instanceof DagValidationError) problems.push(...e.problems);
      else throw e;
    }
  }
  if (problems.length) throw new DagValidationError(problems);
  const declaredSomewhere = new Set(specs.flatMap((s) => Object.keys(s.params)));
  const undeclared = Object.keys(params).filter((p) => !declaredSomewhere.has(p));
  if (undeclared.length) throw new InvalidInputError(`--param ${undeclared.join(', ')}: declared by none of ${files.join(', ')}`);
  return specs;
}

export function dagFileJsonSchema(kind: 'dag' | 'template' = 'dag'): Record<string, unknown> {
  const schema = placeholdersAllowed(z.toJSONSchema(kind === 'dag' ? dagFileSchema : templateFileSchema, { target: 'draft-2020-12', unrepresentable: 'any' })) as Record<string, unknown>;
  return {
    ...schema,
    // Top-level x-… fields are ignored by the loader (a place for shared anchors): editors must not flag them.
    patternProperties: { [`^${EXTENSION_PREFIX}`]: {} },
    $id: `https://dagent.dev/schemas/${kind}.schema.json`,
    title: kind === 'dag' ? 'dagent DAG file' : 'dagent task-group template',
  };
}

/**
 * The loader fills in `${params.NAME}` before it checks a value; an editor checks the text as written. So a string
 * the format constrains by a pattern (a model name, a for_each ref) is also accepted with a placeholder in it.
 */
function placeholdersAllowed(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(placeholdersAllowed);
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = k === 'pattern' && typeof v === 'string' ? `${v}|\\$\\{params\\.[A-Za-z_][A-Za-z0-9_]*\\}` : placeholdersAllowed(v);
  return out;
}

/** How often `submit --wait` looks at the DAG, as `dagent watch` does by default. */
const WAIT_INTERVAL_MS = 250;

export function submitCommands(program: Command, ctx: CommandContext): void {
  program
    .command('submit')
    .description('create DAGs from YAML files, all in one transaction (all or none)')
    .argument('<files...>', 'DAG YAML files')
    .option('-p, --param <name=value>', 'set a DAG param (repeatable)', paramCollect, {})
    .option('--wait', 'then follow each DAG live until it ends, as `dagent watch` does; exit 1 unless all complete')
    .option('--json', 'machine-readable output (with --wait: printed at the end, with each DAG\'s final status)')
    .option('--force', 'submit even when an llm-judge step has no active judge agent that can serve it (warned, not refused)')
    .option('--tenant <id>', 'the tenant the DAGs (and schedules) belong to; default the default tenant')
    .action(async (files: string[], opts: { param: Record<string, string>; wait?: boolean; json?: boolean; force?: boolean; tenant?: string }) => {
      const specs = await dagFilesLoad(files, opts.param, configFromEnv(ctx.io.env).fileRoots);
      scheduledParamsRefuse(specs, opts.param);
      const cfg = configFromEnv(ctx.io.env);
      const out = new Output(ctx.io, !!opts.json);
      await withDatabase(ctx, async (d) => {
        const results = await dagSubmitOrSchedule(d.db, specs, { createdBy: 'cli', log: ctx.log, maxQueued: cfg.maxQueued, replaceAnySchedule: true, force: opts.force, tenant: opts.tenant });
        if (!opts.json) for (const w of results.flatMap((r) => r.warnings ?? [])) ctx.io.stderr(`warning: ${terminalSafe(w)}\n`);
        const line = (r: (typeof results)[number]) => 'schedule' in r
          ? `scheduled ${r.schedule}: next fire ${r.nextFireAt.toISOString()}`
          : r.created ? r.dagId : `${r.dagId} (already exists: same idempotency key)`;
        if (!opts.wait) return out.result(results, () => results.forEach((r) => out.line(line(r))));
        const { dagWatch, dagProgressFollow, DagProgress } = await import('./progress.js');
        const ended: Array<{ dagId: string; status: string; blockedReason: string | null }> = [];
        for (const r of results) {
          if ('schedule' in r) {
            if (!opts.json) out.line(line(r));
            continue;
          }
          if (!opts.json) out.line(`${line(r)}: following it until it ends (Ctrl-C stops watching, not the DAG)`);
          const s = opts.json
            ? await dagProgressFollow(new DagProgress(d.db, r.dagId, { transition: () => {}, status: () => {} }), WAIT_INTERVAL_MS)
            : await dagWatch(d.db, r.dagId, ctx.io, WAIT_INTERVAL_MS);
          ended.push({ dagId: r.dagId, status: s.dag.status, blockedReason: s.dag.blockedReason });
        }
        const final = results.map((r) => ({ ...r, ...('dagId' in r ? { status: ended.find((e) => e.dagId === r.dagId)?.status } : {}) }));
        const notCompleted = ended.find((e) => e.status !== 'completed');
        if (notCompleted) {
          const failed = new DagNotCompletedError(notCompleted.dagId, notCompleted.status, notCompleted.blockedReason);
          // With --json, one document on stdout: the error, carrying the results.
          throw opts.json ? Object.assign(failed, { details: { ...failed.details, results: final } }) : failed;
        }
        out.result(final, () => out.line(`${ended.length} DAG(s) completed`));
      });
    });

  program
    .command('validate')
    .description('check DAG files without writing anything')
    .argument('<files...>', 'DAG YAML files')
    .option('-p, --param <name=value>', 'set a DAG param (repeatable)', paramCollect, {})
    .option('--json', 'machine-readable output')
    .action(async (files: string[], opts: { param: Record<string, string>; json?: boolean }) => {
      const specs = await dagFilesLoad(files, opts.param, configFromEnv(ctx.io.env).fileRoots);
      const out = new Output(ctx.io, !!opts.json);
      const summary = specs.map((s) => ({ file: s.sourceFile, name: s.name, tasks: s.tasks.length, valid: true }));
      out.result(summary, () => {
        for (const s of summary) out.line(`${s.file}: ok (${s.name}, ${s.tasks} tasks)`);
      });
    });

  program
    .command('schema')
    .description('print the JSON Schema of the DAG file format (for editor validation and completion)')
    .option('--template', 'the schema of a task-group template file (dags/templates/*.yaml) instead')
    .option('--json', 'accepted for uniformity: the output is JSON either way')
    .action((opts: { template?: boolean }) => ctx.io.stdout(`${JSON.stringify(dagFileJsonSchema(opts.template ? 'template' : 'dag'), null, 2)}\n`));
  program
    .command('openapi')
    .description('print the HTTP API\'s OpenAPI 3.1 document (generated from the routes\' zod schemas; also served at /openapi.json)')
    .action(async () => {
      // The routes are loaded for this command only: submit and validate never load the HTTP server.
      const { openApiDocumentBuild } = await import('../http/server.js');
      ctx.io.stdout(`${JSON.stringify(await openApiDocumentBuild(), null, 2)}\n`);
    });
}

/** --param values are not stored with a schedule: a scheduled file takes its per-fire params from schedule.params. */
export function scheduledParamsRefuse(specs: DagSpec[], params: Record<string, string>): void {
  const scheduled = specs.filter((sp) => sp.schedule);
  if (scheduled.length && Object.keys(params).length) {
    throw new InvalidInputError(`--param is not stored with a schedule: set the values in schedule.params of ${scheduled.map((sp) => sp.sourceFile).join(', ')}`);
  }
}
