import type { Command } from 'commander';
import type { CommandContext } from './context.js';

type Register = (program: Command, ctx: CommandContext) => void;

/**
 * Every top-level command: the module that defines it, loaded only when the command runs, and the
 * line `dagent --help` shows without loading any of them (the start-up time; docs/benchmarks.md).
 * Each line is the command's own description (test/cli/help.test.ts holds them equal).
 * A new command module is one entry here.
 */
export const COMMAND_MODULES: ReadonlyArray<{ commands: Readonly<Record<string, string>>; load: () => Promise<Register> }> = [
  {
    commands: {
      submit: 'create DAGs from YAML files, all in one transaction (all or none)',
      validate: 'check DAG files without writing anything',
      schema: 'print the JSON Schema of the DAG file format (for editor validation and completion)',
      openapi: 'print the HTTP API\'s OpenAPI 3.1 document (generated from the routes\' zod schemas; also served at /openapi.json)',
    },
    load: async () => (await import('./submit.js')).submitCommands,
  },
  {
    commands: {
      status: 'a DAG and its tasks',
      task: 'inspect one task, or run it again',
      tasks: 'list tasks',
      stats: 'counts by status and priority tier, oldest READY age, tenants and their shares, agents',
      graph: 'draw a DAG (from the database, with statuses, or from a file)',
    },
    load: async () => (await import('./inspect.js')).inspectCommands,
  },
  {
    commands: { logs: 'what an agent logged while it ran a task: one attempt (the latest by default), or follow it live' },
    load: async () => (await import('./logs.js')).logsCommand,
  },
  {
    commands: { stream: 'print a task\'s stream (ctx.stream) as it is written, until it ends' },
    load: async () => (await import('./stream.js')).streamCommand,
  },
  { commands: { cancel: 'cancel a DAG, or a task and everything downstream of it' }, load: async () => (await import('./cancel.js')).cancelCommands },
  {
    commands: {
      approvals: 'list the approval steps waiting for a person, oldest first',
      approve: 'approve the output waiting on a task\'s approval step (optionally replacing it first)',
      reject: 'reject the output waiting on a task\'s approval step: the attempt fails with the comment, which its retry reads',
    },
    load: async () => (await import('./approvals.js')).approvalCommands,
  },
  {
    commands: { signal: 'send a signal: tasks waiting on the key (wait_for) complete with the payload as their output' },
    load: async () => (await import('./signal-send.js')).signalCommand,
  },
  {
    commands: { limits: 'rate limits per model or provider, shared by the fleet: requests and tokens per window' },
    load: async () => (await import('./limits.js')).limitsCommands,
  },
  {
    commands: { tenants: 'tenants: whose DAGs, schedules and agents, and their weights in fair share' },
    load: async () => (await import('./tenants.js')).tenantCommands,
  },
  { commands: { dlq: 'review and resolve dead-lettered tasks' }, load: async () => (await import('./dlq.js')).dlqCommands },
  {
    commands: { prune: 'delete finished DAGs (with their tasks, attempts, outputs, logs, events), old events, webhook deliveries and long-offline agents, in small batches' },
    load: async () => (await import('./prune.js')).pruneCommand,
  },
  {
    commands: {
      priority: 'set the base priority (0–100, lower is more urgent) of a task, or of every unfinished task of a DAG',
      dag: 'change a DAG, re-run a finished one with a change as a new DAG, or compare two runs',
      costs: 'spend per day, per agent (budget, reserved, left), per DAG and per model',
    },
    load: async () => (await import('./priority.js')).priorityCommands,
  },
  { commands: { cron: 'cron schedules: DAGs created on a schedule' }, load: async () => (await import('./cron.js')).cronCommands },
  {
    commands: { watch: 'show a DAG\'s progress live, a line per task transition and a status line, until it completes, blocks or is cancelled' },
    load: async () => (await import('./watch.js')).watchCommand,
  },
  { commands: { agent: 'run agents' }, load: async () => (await import('./agent.js')).agentCommands },
  {
    commands: { mcp: 'serve MCP over stdio, for an MCP-speaking agent harness: an agent token works tasks as its agent' },
    load: async () => (await import('./mcp.js')).mcpCommand,
  },
  { commands: { demo: 'audit this repository with the example agents, live: the main job behind npm start' }, load: async () => (await import('./demo.js')).demoCommand },
  {
    commands: { up: 'run the maintenance loops, the HTTP API and dashboard, and any configured agents until SIGINT/SIGTERM' },
    load: async () => (await import('./up.js')).upCommand,
  },
  { commands: { tokens: 'bearer tokens for the HTTP API (stored hashed; the secret is shown once)' }, load: async () => (await import('./tokens.js')).tokenCommands },
  {
    commands: { webhooks: 'POST a JSON event to URLs on dead letters (and DAG blocked/completed/cancelled if subscribed)' },
    load: async () => (await import('./webhooks.js')).webhookCommands,
  },
  { commands: { db: 'the embedded PostgreSQL server (when DATABASE_URL is not set)' }, load: async () => (await import('./db.js')).dbCommands },
  { commands: { migrate: 'apply pending database migrations (every command also does this on start)' }, load: async () => (await import('./migrate.js')).migrateCommand },
];
