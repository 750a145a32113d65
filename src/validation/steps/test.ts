import path from 'node:path';
import { z } from 'zod';
import { durationSchema, durationSeconds } from '../../durations.js';
import { outsideTheProject } from '../project-files.js';
import type { TaskStepKind } from './kind.js';

export const TEST_STEP_DEFAULTS = {
  /** A test command runs at most this long unless the step sets `timeout`: then a negative verdict of class timeout. */
  timeoutSec: 300,
  /** Time the validation task may run beyond the command's timeout before the reaper takes it back. */
  slackSec: 60,
} as const;

const fileSchema = z.strictObject({
  kind: z.literal('test'),
  command: z.string().max(4000),
  cwd: z.string().max(500).optional().describe('working directory, relative to the DAG file; default the DAG file\'s directory'),
  timeout: durationSchema.optional().describe('kill the command after this long (default 5m): a negative verdict of class timeout'),
  env: z.record(z.string(), z.string()).optional(),
}).describe('run a command with the output in the file named by $DAGENT_OUTPUT_FILE; exit 0 passes');

export interface TestStep { kind: 'test'; command: string; cwd?: string; timeoutSec: number; env: Record<string, string> }

/** A command run by an agent with validate:test, the output in $DAGENT_OUTPUT_FILE; exit 0 passes. */
export const testStep: TaskStepKind<'test', typeof fileSchema, TestStep> = {
  kind: 'test',
  mode: 'task',
  capability: 'validate:test',
  fileSchema,
  resolve(s, { baseDir, roots }) {
    const cwd = path.resolve(baseDir, s.cwd ?? '.');
    // Inside the project, as every path in a DAG (the command itself is the DAG author's to write).
    const inside = [baseDir, ...(roots ?? [])].map((r) => path.resolve(r)).some((r) => cwd === r || cwd.startsWith(r + path.sep));
    if (!inside) return [{ path: ['cwd'], message: outsideTheProject(s.cwd ?? '.', { baseDir, roots }) }];
    return {
      kind: 'test',
      command: s.command,
      cwd,
      timeoutSec: s.timeout === undefined ? TEST_STEP_DEFAULTS.timeoutSec : durationSeconds(s.timeout),
      env: s.env ?? {},
    };
  },
  task: (step) => ({ models: [], maxDurationSec: Math.ceil(step.timeoutSec) + TEST_STEP_DEFAULTS.slackSec }),
};
