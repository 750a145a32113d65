import { describe, expect, it } from 'vitest';
import { modelsForAttempt, retryDecide, retryDelaySec } from '../../../src/engine/attempt/retry-policy.js';
import { TASK_DEFAULTS, type RetryPolicy } from '../../../src/dag/spec.js';

const policy = (p: Partial<RetryPolicy> = {}): RetryPolicy => ({
  strategy: 'exponential', initialDelaySec: 10, multiplier: 2, maxDelaySec: 300, jitter: 0, noRetryOn: [], ...p,
});
const facts = { errorClass: 'crash', attempt: 1, maxAttempts: 5, failures: 1, distinctAgents: 1 };

describe('retry policy', () => {
  it('computes exponential, fixed and immediate delays, capped', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelaySec(policy(), n))).toEqual([10, 20, 40, 80, 160, 300]);
    expect(retryDelaySec(policy({ strategy: 'fixed' }), 4)).toBe(10);
    expect(retryDelaySec(policy({ strategy: 'immediate' }), 4)).toBe(0);
  });

  it('applies jitter within ± the fraction and never beyond max_delay', () => {
    const p = policy({ jitter: 0.5 });
    expect(retryDelaySec(p, 1, () => 0)).toBe(5);
    expect(retryDelaySec(p, 1, () => 1)).toBe(15);
    expect(retryDelaySec(p, 9, () => 1)).toBe(300);
  });

  it('dead-letters for no_retry_on, retry_on misses, non-retryable errors, exhaustion and poison pills', () => {
    expect(retryDecide(policy({ noRetryOn: ['auth_failure'] }), { ...facts, errorClass: 'auth_failure' })).toMatchObject({ action: 'dead_letter' });
    expect(retryDecide(policy({ retryOn: ['timeout'] }), facts)).toMatchObject({ action: 'dead_letter', reason: 'error class crash is not in retry_on' });
    expect(retryDecide(policy(), { ...facts, retryable: false })).toMatchObject({ action: 'dead_letter', poisonPill: false });
    expect(retryDecide(policy(), { ...facts, attempt: 5 })).toMatchObject({ action: 'dead_letter', reason: 'attempts exhausted (5/5)' });
    expect(retryDecide(policy(), { ...facts, attempt: 3, failures: 3, distinctAgents: 2 })).toMatchObject({ action: 'dead_letter', poisonPill: true });
    expect(retryDecide(policy(), { ...facts, attempt: 3, failures: 3, distinctAgents: 1 })).toEqual({ action: 'retry', delaySec: 40 });
  });

  it('never retries sooner than a provider\'s Retry-After, nor sooner than the policy', () => {
    const policy = { ...TASK_DEFAULTS.retry, strategy: 'fixed' as const, initialDelaySec: 10, jitter: 0 };
    const facts = { errorClass: 'rate_limit', attempt: 1, maxAttempts: 3, failures: 1, distinctAgents: 1 };
    expect(retryDecide(policy, { ...facts, retryAfterSec: 30 })).toEqual({ action: 'retry', delaySec: 30 });
    expect(retryDecide(policy, { ...facts, retryAfterSec: 2 })).toEqual({ action: 'retry', delaySec: 10 });
  });

  it('switches to fallback models from retry 2 (the third attempt) on', () => {
    const body = { models: ['big'], fallbackModels: ['small'] };
    expect([1, 2, 3, 4].map((a) => modelsForAttempt(body, a))).toEqual([['big'], ['big'], ['small'], ['small']]);
    expect(modelsForAttempt({ models: ['big'], fallbackModels: [] }, 3)).toEqual(['big']);
  });
});
