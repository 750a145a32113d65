import { describe, expect, it } from 'vitest';
import { BudgetExceededError } from '../../src/errors.js';
import { AuthFailureError, NonRetryableError, RateLimitError, errorClassify } from '../../src/runtime/task-errors.js';
import { TaskError } from '../../src/errors.js';

describe('errorClassify', () => {
  it('takes class, retryability, Retry-After and details from typed errors', () => {
    expect(errorClassify(new RateLimitError('slow down', { retryAfterSec: 7 }))).toMatchObject({ errorClass: 'rate_limit', retryable: true, retryAfterSec: 7 });
    expect(errorClassify(new AuthFailureError('bad key'))).toMatchObject({ errorClass: 'auth_failure', retryable: false });
    expect(errorClassify(new NonRetryableError('no', { errorClass: 'disk_full' }))).toMatchObject({ errorClass: 'disk_full', retryable: false });
    expect(errorClassify(new TaskError('command_failed', 'exit 2', { details: { exitCode: 2 } })).details).toMatchObject({ exitCode: 2 });
  });

  it('recognises a TaskError from another copy of the package by its shape', () => {
    const foreign = Object.assign(new Error('quota'), { code: 'TASK_FAILED', errorClass: 'rate_limit', retryable: true, details: { retryAfterSec: 3 } });
    expect(errorClassify(foreign)).toMatchObject({ errorClass: 'rate_limit', retryable: true, retryAfterSec: 3 });
  });

  it('classifies a spawn refused for the DAG budget as budget_exceeded, not retried', () => {
    expect(errorClassify(new BudgetExceededError('spent'))).toEqual({ errorClass: 'budget_exceeded', message: 'spent', retryable: false });
  });

  it('classifies anything else as error, keeping its message', () => {
    expect(errorClassify(new Error('boom'))).toEqual({ errorClass: 'error', message: 'boom' });
    expect(errorClassify('plain string')).toEqual({ errorClass: 'error', message: 'plain string' });
    expect(errorClassify(new Error(''))).toEqual({ errorClass: 'error', message: 'handler threw without a message' });
  });
});
