/**
 * A wake-up signal for a loop that waits for work: `wait(ms)` resolves when
 * woken, or after `ms`. A wake with nobody waiting is kept for the next wait,
 * so a NOTIFY that lands between an empty claim and the wait is never lost.
 */
export class Wakeup {
  private waiters: Array<() => void> = [];
  private pending = false;

  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const waiters = this.waiters;
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        const i = waiters.indexOf(done);
        if (i >= 0) waiters.splice(i, 1);
        resolve();
      }
      waiters.push(done);
    });
  }

  wake(): void {
    if (this.waiters.length === 0) this.pending = true;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}
