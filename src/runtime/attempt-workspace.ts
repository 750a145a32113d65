import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { taskWorkspaceAttempts } from '../db/queries/tasks-workspaces.js';
import type { ClaimedTask } from '../engine/attempt/claim.js';
import type { WorkspaceSpec } from '../dag/spec.js';
import { TaskError } from '../errors.js';
import { engineEvents } from '../observability/engine-events.js';
import { workspacesReclaim } from '../workspaces/reclaim.js';
import { workspaceDiskCheck, workspaceFinish, workspaceLocate, workspaceOpen, type Workspace } from '../workspaces/workspace.js';

export type { Workspace, WorkspaceSummary } from '../workspaces/workspace.js';

/** Where this process makes tasks' worktrees, and how long one kept after a failure stays. */
export interface WorkspaceSettings {
  /** DAGENT_WORKSPACE_ROOT. */
  root: string;
  /** DAGENT_RETENTION_WORKSPACES in seconds; null: kept ones stay until removed by hand. */
  keptSec: number | null;
  /** DAGENT_WORKSPACE_REPO_URLS: the repository URLs (or their prefixes) this agent may clone. Default none. */
  repoUrls?: readonly string[];
}

/** What a validation task says of the task whose output it judges (engine/attempt/validation-task.ts). */
interface ValidationSubject { id?: unknown; fence?: unknown; workspace?: WorkspaceSpec }

/**
 * One attempt's worktree (src/workspaces/): made before the handler runs when the task declares a workspace,
 * its work committed and summed up in the output at the end, and reclaimed once the attempt ended, as the
 * attempt's row says (removed; left for the validation of its output; kept after a failure with keep: on_failure).
 * A validation task whose subject had a worktree on this machine gets that one, to read, never to remove.
 */
export class AttemptWorkspace {
  /** The worktree this attempt made (and so ends). */
  private own: Workspace | undefined;
  /** What the handler sees as ctx.workspace: its own, or the judged attempt's. */
  private seen: Workspace | null = null;

  constructor(
    private readonly db: Db, private readonly task: ClaimedTask, private readonly settings: WorkspaceSettings,
    private readonly log: () => Logger,
  ) {}

  /** Set once a check while the handler ran found the worktree past its cap: what the attempt fails with. */
  tooLarge: TaskError | undefined;
  private measuring = false;

  get current(): Workspace | null {
    return this.seen;
  }

  /**
   * At each heartbeat while the handler runs: the worktree's size against LIMITS.workspaceBytes, one walk at a time
   * (a walk that outlasts a beat is not doubled). Past the cap, `stop` ends the attempt (it fails with tooLarge).
   */
  diskWatch(stop: () => void): void {
    if (!this.own || this.measuring || this.tooLarge) return;
    this.measuring = true;
    workspaceDiskCheck(this.own)
      .then((r) => {
        if (!('tooLarge' in r)) return;
        this.tooLarge = r.tooLarge;
        engineEvents.emit('workspace', { result: 'refused', errorClass: r.tooLarge.errorClass });
        stop();
      })
      .catch((err: unknown) => this.log().warn({ err }, 'workspace size not measured'))
      .finally(() => { this.measuring = false; });
  }

  async open(): Promise<void> {
    const t = this.task;
    if (t.origin === 'validation') {
      const subject = (t.spec.input as { subject?: ValidationSubject } | undefined)?.subject;
      if (subject?.workspace && typeof subject.id === 'string' && typeof subject.fence === 'number') {
        this.seen = await workspaceLocate(this.settings.root, subject.workspace, t.dagId, subject.id, subject.fence).catch(() => undefined) ?? null;
      }
      return;
    }
    const spec = t.spec.workspace;
    if (!spec) return;
    // The schemas give an agent no way to write one; should a spec say so anyway, its repository is not the DAG author's choice.
    if (t.origin !== 'dag' && t.origin !== 'template') {
      throw new TaskError('untrusted_spec', `task ${t.key} was written by an agent (origin ${t.origin}): only a DAG's author names a workspace's repository`, { retryable: false });
    }
    // A clean start: what earlier attempts of this task left here (a killed agent's, a lost lease's) goes first.
    await this.reclaim(spec);
    this.own = await workspaceOpen({ root: this.settings.root, repoUrls: this.settings.repoUrls ?? [], spec, dagId: t.dagId, taskId: t.id, taskKey: t.key, fence: t.fence }).catch((err: unknown) => {
      if (err instanceof TaskError) engineEvents.emit('workspace', { result: 'refused', errorClass: err.errorClass });
      throw err;
    });
    engineEvents.emit('workspace', { result: 'made' });
    this.seen = this.own;
    this.log().info({ path: this.own.path, branch: this.own.branch, baseCommit: this.own.baseCommit }, 'workspace ready');
  }

  /**
   * The output with `workspace` (the branch, its head, the diff's stat) once the attempt's work is committed on its
   * branch: an object output gains the field (the runtime's, over any the handler set), any other is `{ result, workspace }`.
   */
  async finish(output: unknown): Promise<unknown> {
    if (!this.own) return output;
    const summary = await workspaceFinish(this.own, `dagent: ${this.task.key} (${this.task.dagId}), attempt ${this.task.attempt}`).catch((err: unknown) => {
      if (err instanceof TaskError) engineEvents.emit('workspace', { result: 'refused', errorClass: err.errorClass });
      throw err;
    });
    engineEvents.emit('workspace', { result: 'committed', diskBytes: summary.diskBytes });
    this.log().info({ head: summary.head, files: summary.diffStat.files, diskBytes: summary.diskBytes }, 'workspace committed');
    if (output !== null && typeof output === 'object' && !Array.isArray(output)) return { ...output, workspace: summary };
    return { result: output ?? null, workspace: summary };
  }

  /** After the attempt ended: its worktree goes, or stays as its row says (reclaim.ts workspaceFate). */
  async close(): Promise<void> {
    const spec = this.task.spec.workspace;
    if (!this.own || !spec) return;
    await this.reclaim(spec).catch((err: unknown) => this.log().warn({ err }, 'workspace not reclaimed; the reclaim loop will'));
  }

  private reclaim(spec: WorkspaceSpec) {
    return workspacesReclaim({
      root: this.settings.root, keptSec: this.settings.keptSec, states: (refs) => taskWorkspaceAttempts(this.db, refs),
      only: { repo: spec.repo, dagId: this.task.dagId, taskId: this.task.id },
    });
  }
}
