/**
 * Thrown error classes carry their `code` in one style, UPPER_SNAKE_CASE, as documented in
 * docs/architecture.md ("Error codes: two vocabularies"); the lower-snake ErrorInfo codes of tasks
 * and attempts are the other vocabulary and are not thrown classes' codes.
 */
import { describe, expect, it } from 'vitest';
import { MissingApiKeyError } from '../src/cli/real.js';
import { RedisUnreachableError } from '../src/distributed/reach.js';
import { ApprovalError, MissingPackageError, PlanValidationError, RetryError, RunLockedError, SqliteDriverError, StoreError, ToolSetupError } from '../src/index.js';
import { PlanCycleError } from '../src/plan/ranks.js';
import { HttpClientClosedError } from '../src/providers/http.js';
import { SseLimitError } from '../src/providers/sse.js';
import { EventsFileError } from '../src/report/cli.js';

describe('thrown error codes', () => {
  it('are UPPER_SNAKE_CASE in every thrown error class', () => {
    const errors: { code: string; name: string }[] = [
      new PlanValidationError([{ path: 'tasks', message: 'x' }]),
      new PlanCycleError(1),
      new RunLockedError('r1', { pid: 1, host: 'h', since: 0 }),
      new RetryError('RUN_NOT_FOUND', 'x', 'r1'),
      new StoreError('x', '/tmp/runs.db', 'SQLITE_FULL'),
      new SqliteDriverError('x'),
      new ToolSetupError([{ path: 'tools', message: 'x' }]),
      new MissingPackageError(['bullmq'], 'x'),
      new MissingApiKeyError(),
      new RedisUnreachableError('redis://127.0.0.1:6379', 1000, undefined),
      new EventsFileError('e.jsonl', 1, 'x'),
      new SseLimitError('line', 10),
      new HttpClientClosedError(),
      new ApprovalError('NOT_WAITING', 'x'),
    ];
    for (const error of errors) expect(error.code, error.name).toMatch(/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/);
    expect(new StoreError('x', '/tmp/runs.db', 'SQLITE_FULL').code).toBe('STORE_FAILED');
    expect(new SqliteDriverError('x').code).toBe('SQLITE_DRIVER_MISSING');
  });
});
