import { dagGraphBuild, cycleFind } from '../dag/graph.js';
import { CycleError } from '../errors.js';

/** Throws CycleError with the cycle's path (in task keys) if these edges are not acyclic. */
export function graphCheckAcyclic(nodes: string[], edges: ReadonlyArray<readonly [string, string]>, context = ''): void {
  const cycle = cycleFind(dagGraphBuild(nodes, edges));
  if (cycle) throw new CycleError(cycle, context);
}
