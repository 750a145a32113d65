/**
 * Every size dagent refuses beyond, with a clear error naming the limit. Each can
 * be changed for a process with DAGENT_LIMIT_<NAME> (DAGENT_LIMIT_DAG_FILE_BYTES=2097152);
 * docs/security.md lists them. Read once, when the process starts.
 */
export const LIMIT_DEFAULTS = {
  /** Largest DAG file, and the largest HTTP request body (a DAG posted as YAML or JSON, an agent's output): 1 MiB. */
  dagFileBytes: 1024 * 1024,
  /** Most characters a DAG may hold once YAML aliases and `${params…}` are expanded: 4 Mi. */
  specChars: 4 * 1024 * 1024,
  /** Most params a DAG may declare. */
  params: 100,
  /** Most tasks in one DAG, counting those its agents spawn. */
  tasksPerDag: 20_000,
  /** Most upstream tasks one task may name in depends_on (the width of a join). */
  upstreamPerTask: 10_000,
  /** Most dependency edges in one DAG, counting those its agents add (each is checked for cycles, and costs every rank refresh). */
  edgesPerDag: 100_000,
  /** Most subtasks one spawn call may add. */
  spawnPerCall: 1_000,
  /** Largest output an agent may report for a task (as JSON): 1 MiB. */
  outputBytes: 1024 * 1024,
  /** Most items a for_each task maps over (its children): more fails it, naming this limit. */
  mapItems: 10_000,
  /** Largest list of its children's outputs a for_each task completes with (as JSON): 16 MiB. */
  mapOutputBytes: 16 * 1024 * 1024,
  /** Most bytes of spec a for_each task's children may hold together (each a copy of its spec, with its item): 64 MiB. */
  mapSpecBytes: 64 * 1024 * 1024,
  /** Largest result a durable step may record (ctx.step, PUT /api/tasks/:id/steps/:name), as JSON: 1 MiB. */
  stepResultBytes: 1024 * 1024,
  /** Most durable steps one task may record, over all its attempts and both scopes. */
  stepsPerTask: 1_000,
  /**
   * Most bytes of durable step results one task may hold, over all its attempts and both scopes: 64 MiB (without it,
   * stepsPerTask × stepResultBytes would let one agent write a GiB per task).
   */
  stepBytesPerTask: 64 * 1024 * 1024,
  /** Most log lines kept per attempt (ctx.log, POST /api/tasks/:id/logs); later ones are counted as dropped. */
  logLinesPerAttempt: 1_000,
  /** Most bytes of log (messages and fields) kept per attempt: 256 KiB. */
  logBytesPerAttempt: 256 * 1024,
  /**
   * Most log lines kept per task, over all its attempts and releases (a release spends no attempt, so an agent that
   * claims, logs and releases in a loop would otherwise file a fresh allowance each time); later ones are dropped.
   */
  logLinesPerTask: 10_000,
  /** Most bytes of log kept per task, over all its attempts and releases: 2.5 MiB. */
  logBytesPerTask: 10 * 256 * 1024,
  /** Longest log message kept whole, in characters; a longer one is cut, and says so. */
  logLineChars: 4_096,
  /** Deepest nesting of arrays and objects in a request body, a DAG file or an output. */
  jsonDepth: 64,
  /** Largest schema file a json-schema validation step may name: 1 MiB. */
  schemaFileBytes: 1024 * 1024,
  /** Longest a schema file may take to read (a hung network mount, say) before the DAG is refused, in ms. */
  fileReadTimeoutMs: 5_000,
  /** Longest text a regular expression is run against (a regex step, a JSON Schema pattern); longer never matches. */
  regexInputChars: 256 * 1024,
  /** Largest `details` an agent may attach to a failure (as JSON): 64 KiB. Dead-letter entries keep it per attempt. */
  failureDetailsBytes: 64 * 1024,
  /** Most USD one report (a completion, failure, release or spawn) may say it spent. */
  reportCostUsd: 1_000_000,
  /** Most tokens (in, and out) one report may say it used. */
  reportTokens: 1_000_000_000,
  /** Most bytes an attempt's streams (ctx.stream) may hold together: past it the stream being written ends, marked truncated (8 MiB). */
  streamBytesPerAttempt: 8 * 1024 * 1024,
  /** Most streams (names) one attempt may write: each is a row and a feed for its readers. */
  streamsPerAttempt: 64,
  /** Largest chunk one stream write may carry (64 KiB): a longer text is written as several. */
  streamChunkBytes: 64 * 1024,
  /** Most bytes an event stream may have waiting for a reader that does not read: beyond, the stream is cut off (1 MiB). */
  streamBacklogBytes: 1024 * 1024,
  /** Compiled JSON Schemas kept per process; the least recently used is freed beyond this. */
  schemaCacheEntries: 500,
  /**
   * Most distinct JSON Schemas (json-schema steps with different schemas) one DAG may hold, its templates' included.
   * Each is compiled at submission, 1-3 ms apiece (~40 ms for one that `$ref`s its meta-schema): 999 tasks with
   * 10 distinct schemas each kept the server busy 17-27 s per submission.
   */
  schemasPerDag: 1_000,
  /**
   * Most worktrees one repository may have under a workspace root at once (tasks with a `workspace` running, under
   * validation, or kept after a failure): past it an attempt fails with class workspace_limit.
   */
  workspacesPerRepo: 32,
  /**
   * Most bytes of files one workspace's worktree may hold (its files, not the objects its commits add to the
   * repository): 2 GiB. Measured at each heartbeat and at the end; past it the attempt fails with class workspace_too_large.
   */
  workspaceBytes: 2 * 1024 * 1024 * 1024,
} as const;

export type LimitName = keyof typeof LIMIT_DEFAULTS;

/** DAGENT_LIMIT_DAG_FILE_BYTES for dagFileBytes. */
export function limitEnvName(name: LimitName): string {
  return `DAGENT_LIMIT_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** The limits for this process, and the environment variables that were set to something that is not a positive whole number. */
export function limitsFromEnv(env: NodeJS.ProcessEnv): { limits: { [K in LimitName]: number }; invalid: string[] } {
  const limits = { ...LIMIT_DEFAULTS } as { [K in LimitName]: number };
  const invalid: string[] = [];
  for (const name of Object.keys(LIMIT_DEFAULTS) as LimitName[]) {
    const raw = env[limitEnvName(name)];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (Number.isInteger(n) && n > 0) limits[name] = n;
    else invalid.push(`${limitEnvName(name)}=${raw}`);
  }
  return { limits, invalid };
}

const fromEnv = limitsFromEnv(process.env);

/** The limits in force in this process (defaults, or DAGENT_LIMIT_* overrides). */
export const LIMITS: Readonly<{ [K in LimitName]: number }> = Object.freeze(fromEnv.limits);

/** DAGENT_LIMIT_* variables this process ignored because their value is not a positive whole number. */
export const LIMITS_INVALID_ENV: readonly string[] = fromEnv.invalid;
