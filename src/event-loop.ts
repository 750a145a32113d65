import { performance } from 'node:perf_hooks';

/**
 * Long synchronous work inside a request holds every other request of the process: a node serves the API and
 * agents at once, and a 10,000-task DAG's submit spent ~40 ms building its graph, then ranking it, then making its
 * rows, each in one go (a claim beside it waited up to 0.2 s; docs/benchmarks.md "A large DAG's submit").
 */

/** How long a slice of such work runs before the event loop gets a turn. */
const EVENT_LOOP_SLICE_MS = 5;

/** Give the event loop a turn: what is ready (another request's reply, a timer) runs before the caller goes on. */
export function eventLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `fn` over `items`, giving the event loop a turn every EVENT_LOOP_SLICE_MS (the clock is read every 64 items). */
export async function forEachSliced<T>(items: Iterable<T>, fn: (item: T) => void): Promise<void> {
  let until = performance.now() + EVENT_LOOP_SLICE_MS;
  let i = 0;
  for (const item of items) {
    fn(item);
    if ((++i & 63) === 0 && performance.now() > until) {
      await eventLoopTurn();
      until = performance.now() + EVENT_LOOP_SLICE_MS;
    }
  }
}

/**
 * `fn` over `items` where each item is work of its own that may wait (a task's validation steps: schemas compiled,
 * files read): the clock is read after every item, and the event loop gets a turn every EVENT_LOOP_SLICE_MS.
 * Awaiting alone is no turn when nothing waits: the next item would run before any other request.
 */
export async function forEachSlicedAsync<T>(items: Iterable<T>, fn: (item: T) => Promise<void>): Promise<void> {
  let until = performance.now() + EVENT_LOOP_SLICE_MS;
  for (const item of items) {
    await fn(item);
    if (performance.now() > until) {
      await eventLoopTurn();
      until = performance.now() + EVENT_LOOP_SLICE_MS;
    }
  }
}

/** `items.map(fn)`, sliced as forEachSliced. */
export async function mapSliced<T, R>(items: readonly T[], fn: (item: T) => R): Promise<R[]> {
  const out: R[] = [];
  await forEachSliced(items, (item) => void out.push(fn(item)));
  return out;
}

/**
 * `step` run one at a time (a read woken by NOTIFY and a poll): a wake while it runs makes it run once more after
 * it, for what woke it may have come after the run began, and never twice at once. A step that throws is logged by
 * `failed` and left to the next wake. `goOn`: whether a wake that came during a run still needs one (nobody left
 * to read for: no).
 */
export class SingleFlight {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly step: () => Promise<void>, private readonly goOn: () => boolean, private readonly failed: (err: unknown) => void) {}

  /** Run now, or once more after the run under way; resolves when the runs this wake asked for are done. */
  wake(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.step();
        } catch (err) {
          this.failed(err);
        }
      } while (this.again && this.goOn());
    })().finally(() => { this.running = undefined; });
    return this.running;
  }

  /** The run under way, if any (to wait for it before closing). */
  get current(): Promise<void> | undefined {
    return this.running;
  }
}
