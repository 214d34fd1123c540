/**
 * A run's counts from its event stream, as it goes (the progress line, the live page) or saved
 * (the report, the summary's 429s): each event changes one task's tally in a `CountBook`
 * (counts.ts), O(1). The stream of a resume or a retry starts with what earlier lives counted
 * (`run:started`'s `restored`), so a view of its events counts the whole run, as its result does.
 *
 * Tolerant of saved or foreign streams: events before `run:started`, tasks it never named, a
 * `run:started` without `deps` (its plan tasks are counted pending until events name them).
 */
import { costOfUsage, type Price } from '../cost.js';
import { addUsage, type RunEvent, type TaskStatus } from '../protocol.js';
import { CountBook, type TaskTally } from './counts.js';

type Started = Extract<RunEvent, { type: 'run:started' }>;

/** Ids of the plan tasks a stream has not named yet: they cannot clash with a task id (NUL). */
const UNNAMED = '\u0000unnamed:';

export class StreamCounts {
  readonly book = new CountBook();
  /** The plan's models, from `run:started`: a reply without its cost is priced from them. */
  private models: NonNullable<Started['models']> = {};
  /** Each task's plan model (its `task:started`), for pricing such a reply. */
  private readonly modelOf = new Map<string, string>();
  /** Plan tasks counted but not named (a `run:started` without `deps`): the first unknown ids take their place. */
  private unnamed: string[] = [];

  /** The counts now (updated in place). */
  get counts() {
    return this.book.counts;
  }

  /** Folds one event in. */
  add(e: RunEvent): void {
    switch (e.type) {
      case 'run:started':
        return this.started(e);
      case 'task:queued':
        return this.status(e.taskId, 'queued');
      case 'task:started':
        this.modelOf.set(e.taskId, e.model);
        return this.task(e.taskId, (t) => {
          t.status = 'running';
          t.attempts += 1;
        });
      case 'task:completed':
        return this.status(e.taskId, 'completed');
      case 'task:failed':
        // A failed attempt that is retried stays running until its task:queued.
        return e.willRetry ? this.task(e.taskId, (t) => void (t.retries += 1)) : this.status(e.taskId, 'failed');
      case 'task:retry':
        return this.task(e.taskId, (t) => void (t.retries += 1));
      case 'task:skipped':
        return this.status(e.taskId, 'skipped');
      case 'task:cancelled':
        return this.status(e.taskId, 'cancelled');
      case 'task:planned':
        for (const id of e.subtasks) if (!this.book.has(id)) this.book.update(id, () => {});
        if (e.container) this.task(e.taskId, (t) => void (t.container = true));
        return;
      case 'approval:requested':
        return this.status(e.taskId, 'waiting');
      case 'task:reviewed':
        // The reviewer waits for the new draft (pending until it is queued again).
        if (!e.final) this.status(e.taskId, 'pending');
        return;
      case 'model:request':
        return this.task(e.taskId, (t) => void (t.requests += 1));
      case 'model:response': {
        const usd = e.costUsd ?? this.priceOf(e.taskId, e.provider, e.model, e.modelName, e.usage);
        return this.task(e.taskId, (t) => {
          t.usage = addUsage(t.usage, e.usage);
          if (usd === null) t.unpriced += 1;
          else t.costUsd += usd;
        });
      }
      case 'model:error':
        if (e.error?.code === 'rate_limited') this.task(e.taskId, (t) => void (t.rateLimited += 1));
        // A failed call that may have reached the server is charged its worst case, as the result and the journal charge it.
        if (typeof e.costUsd === 'number') this.task(e.taskId, (t) => void (t.costUsd += e.costUsd!));
        return;
      default:
        return;
    }
  }

  /** The plan model a task's calls are priced at, when known. */
  model(id: string): string | undefined {
    return this.modelOf.get(id);
  }

  private started(e: Started): void {
    this.models = e.models ?? {};
    const named = Object.keys(e.deps ?? {});
    for (const id of named) if (!this.book.has(id)) this.book.update(id, () => {});
    for (const [id, status] of Object.entries(e.before ?? {})) this.status(id, status);
    for (const [id, c] of Object.entries(e.restored ?? {})) {
      this.task(id, (t) => {
        t.attempts = c.attempts;
        t.requests = c.requests;
        t.retries = c.retries;
        t.usage = c.usage;
        t.costUsd = c.costUsd;
      });
    }
    for (const id of e.containers ?? []) this.task(id, (t) => void (t.container = true));
    // A stream that does not name its tasks: they are counted all the same, pending (a resume's
    // completed ones, completed), until events name them.
    const missing = Math.max(0, e.tasks - this.book.size);
    const completed = e.before ? 0 : Math.min(missing, e.alreadyCompleted ?? 0);
    for (let i = 0; i < missing; i++) {
      const id = `${UNNAMED}${i}`;
      this.book.update(id, (t) => void (t.status = i < completed ? 'completed' : 'pending'));
      if (i >= completed) this.unnamed.push(id);
    }
  }

  private status(id: string, status: TaskStatus): void {
    this.task(id, (t) => void (t.status = status));
  }

  /** Changes a task's tally; a task seen for the first time takes the place of an unnamed one. */
  private task(id: string, change: (t: TaskTally) => void): void {
    if (!this.book.has(id) && this.unnamed.length > 0) this.book.remove(this.unnamed.pop()!);
    this.book.update(id, change);
  }

  private priceOf(taskId: string, provider: string, model: string, modelName: string | undefined, usage: Parameters<typeof costOfUsage>[0]): number | null {
    const own = modelName ?? this.modelOf.get(taskId);
    const onRoute = (m: { provider: string; model: string } | undefined) => m !== undefined && m.provider === provider && m.model === model;
    let price: Price | undefined = own !== undefined && onRoute(this.models[own]) ? this.models[own]!.price : undefined;
    if (price === undefined) for (const m of Object.values(this.models)) if (onRoute(m) && m.price) (price ??= m.price);
    return price ? costOfUsage(usage, price) : null;
  }
}
