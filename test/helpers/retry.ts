/** What `tasksToRetry` and its kin refused with: the RetryError a call threw (fails the test if it did not refuse). */
import { expect } from 'vitest';
import { RetryError } from '../../src/run/retry.js';

export function refusal(f: () => unknown): RetryError {
  try {
    f();
  } catch (error) {
    expect(error).toBeInstanceOf(RetryError);
    return error as RetryError;
  }
  throw new Error('not refused');
}
