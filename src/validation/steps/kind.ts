import type { z } from 'zod';
import type { ProjectRoots } from '../project-files.js';
import type { Verdict } from '../verdict.js';

/**
 * What a validation step kind declares. A kind is one module in this folder and
 * one line in `index.ts`; the file format, the submission checks, the engine's
 * settle loop and the validation tasks all read it from the registry.
 */

/** Where a problem sits below the step itself: `['schema', 'properties', 'a']`, `['pattern']`, `[]`. */
export type StepPath = readonly (string | number)[];
export interface StepProblem {
  path: StepPath;
  message: string;
  /** A limit of the DAG was passed: the steps after this one would only repeat it, so resolving stops here. */
  limit?: true;
}

/**
 * What resolving a step may use: where its relative paths start, the directories they may reach, and what
 * the DAG's steps resolved so far hold in common (one object per DAG, for limits per DAG).
 */
export interface ResolveContext extends ProjectRoots {
  dag: DagResolution;
}

/** Shared by every step of one DAG while it is resolved. */
export interface DagResolution {
  /** Each distinct JSON Schema (as JSON text) the DAG's steps hold, and what compiling it found wrong (undefined: nothing). */
  schemas: Map<string, { error: string; pointer?: string } | undefined>;
}

/** A step file schema: one strict zod object whose `kind` is a literal. */
export type StepFileSchema = z.ZodObject<{ kind: z.ZodLiteral<string> } & z.core.$ZodLooseShape>;

interface StepKindCommon<Name extends string, File extends StepFileSchema, Stored extends { kind: Name }> {
  kind: Name;
  /** The step as written in a DAG file (`output.validation`); exported with the file format's JSON Schema. */
  fileSchema: File;
  /**
   * The written step as stored on the task, at submission: files read, schemas
   * compiled, patterns built, defaults applied, so a bad step is refused with its
   * location before anything runs, and settling an output never reads the DAG's files.
   */
  resolve(file: z.infer<File>, ctx: ResolveContext): Stored | StepProblem[] | Promise<Stored | StepProblem[]>;
}

/** Checked by the process that submits the output, inside the completion's transaction. */
export interface InlineStepKind<Name extends string, File extends StepFileSchema, Stored extends { kind: Name }>
  extends StepKindCommon<Name, File, Stored> {
  mode: 'inline';
  check(step: Stored, output: unknown): Verdict;
}

/** What a validation task carries besides the step, the output and its subject. */
export interface ValidationTaskPlan {
  /** The validator's instructions (a judge's rubric). */
  prompt?: string;
  /** Models the validator should use, in order of preference. */
  models: string[];
  /** No models of its own: the validator uses the judged task's (its models, then its fallback models). */
  modelsOfSubject?: boolean;
  /** Longest the validation task may run before the reaper takes it back. */
  maxDurationSec?: number;
  /**
   * A person gives the verdict, not an agent: the validation task waits (WAITING, never claimed) until
   * it is approved or rejected, or `timeoutSec` lapses (then the step's own timeout action applies).
   */
  person?: { timeoutSec?: number };
}

/** Run elsewhere, as a validation task that agents holding `capability` claim; its verdict settles the step. */
export interface TaskStepKind<Name extends string, File extends StepFileSchema, Stored extends { kind: Name }>
  extends StepKindCommon<Name, File, Stored> {
  mode: 'task';
  /** The capability (and the task type) of the validation task: `validate:<something>`. */
  capability: `validate:${string}`;
  task(step: Stored): ValidationTaskPlan;
  /** The engine's last word on a verdict the validator returned (a judge's score against the DAG's threshold). */
  verdictApply?<V extends Verdict>(step: Stored, verdict: V): V;
  /**
   * What a verdict lacks for this kind (a judge's score), or undefined: such a verdict is the
   * validator's failure, retried like a malformed one, never the judged output's.
   */
  verdictProblem?(step: Stored, verdict: Verdict): string | undefined;
  /**
   * The output a verdict puts in place of the judged one (an approver's edit), or undefined to keep it.
   * Only a kind whose verdict comes from a person declares it: an agent never rewrites another's output.
   */
  outputEdit?(step: Stored, verdict: Verdict): { output: unknown } | undefined;
}

// `any`: the registry erases each kind's own types once, at lookup by `kind`.
export type AnyInlineStepKind = InlineStepKind<string, StepFileSchema, any>;
export type AnyTaskStepKind = TaskStepKind<string, StepFileSchema, any>;
export type AnyStepKind = AnyInlineStepKind | AnyTaskStepKind;

/** The stored step type a kind module resolves to. */
export type StoredStepOf<K> = K extends { resolve(...args: never[]): infer R } ? Exclude<Awaited<R>, StepProblem[]> : never;
