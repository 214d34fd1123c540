/** What a plan function throws to fail its task at once, with no retry (any other error retries by the task's policy). */
export class NonRetryableError extends Error {
  readonly retryable = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NonRetryableError';
  }
}
