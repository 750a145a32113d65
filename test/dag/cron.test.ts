import { describe, expect, it } from 'vitest';
import { cronDue, cronNextAfter, cronNextRuns, DUE_COUNT_CAP } from '../../src/dag/cron.js';

const iso = (d: Date | null) => d?.toISOString() ?? null;
const BERLIN = 'Europe/Berlin';

describe('cron next fire, from any instant (croner 10 workarounds)', () => {
  it('just after the spring-forward gap still finds the shifted 02:30 (03:30 CEST)', () => {
    for (const t of ['2026-03-29T00:20:00Z', '2026-03-29T01:00:00Z', '2026-03-29T01:29:00Z']) {
      expect(iso(cronNextAfter('30 2 * * *', BERLIN, new Date(t)))).toBe('2026-03-29T01:30:00.000Z');
    }
    expect(iso(cronNextAfter('30 2 * * *', BERLIN, new Date('2026-03-29T01:30:00Z')))).toBe('2026-03-30T00:30:00.000Z');
  });

  it('inside the repeated fall-back hour never answers the past, and interval schedules resume after it', () => {
    for (const t of ['2026-10-25T01:00:00Z', '2026-10-25T01:20:00Z', '2026-10-25T01:59:00Z']) {
      expect(iso(cronNextAfter('30 2 * * *', BERLIN, new Date(t)))).toBe('2026-10-26T01:30:00.000Z');
      expect(iso(cronNextAfter('*/20 * * * *', BERLIN, new Date(t)))).toBe('2026-10-25T02:00:00.000Z');
      expect(iso(cronNextAfter('* * * * * *', BERLIN, new Date(t)))).toBe('2026-10-25T02:00:00.000Z');
    }
  });

  it('lists the next fires in order, in other zones too', () => {
    expect(cronNextRuns('0 9 * * MON', 'America/New_York', new Date('2026-11-21T00:00:00Z'), 2).map(iso))
      .toEqual(['2026-11-23T14:00:00.000Z', '2026-11-30T14:00:00.000Z']);
  });

  it('after a long outage, returns the newest due fires and a lower-bound count without walking every one', () => {
    const due = cronDue('* * * * *', 'UTC', new Date('2026-11-01T00:00:00Z'), new Date('2026-11-09T00:00:30Z'), 2);
    expect(due).toMatchObject({ count: DUE_COUNT_CAP, atLeast: true });
    expect(due.newest.map(iso)).toEqual(['2026-11-08T23:59:00.000Z', '2026-11-09T00:00:00.000Z']);
  });
});
