/**
 * Code steps (`kind: "fn"`): the functions a plan's tasks name, and what each call is given.
 * A function runs in the run's process, calls no key and costs nothing; its return value is the
 * task's output (journaled, checked against `output.schema`, placed in dependents' prompts).
 */

/** What one call of a plan function is given. */
export interface FnContext {
  /** The run's id (stable across resume and retry). */
  readonly runId: string;
  /** The task's id (a map's item step: `<map>/<item name>`, named by the map's `key` or the item's index). With `attempt`, a key that makes a side effect idempotent. */
  readonly taskId: string;
  /** 1 for the first call, 2 for the first retry... A resume after a crash calls again a function that had not completed. */
  readonly attempt: number;
  /** The outputs of the task's deps by id: parsed JSON where the dep has an output schema or is a `fn`, else its text. */
  readonly deps: Readonly<Record<string, unknown>>;
  /** In a map's per-item step: the item. */
  readonly item?: unknown;
  /** In a reduce's merge step: the outputs it merges, in order (parsed as `deps` are). */
  readonly inputs?: readonly unknown[];
  /** Aborted when the run is cancelled, the task's `timeoutMs` passes, or the run stops (a budget, fail-fast). */
  readonly signal: AbortSignal;
  /**
   * The task was sent back by a review's findings or an approval's note: what to change
   * (`findings`), in which round of how many, and the value it returned before (`previous`).
   * Absent on a first round.
   */
  readonly revision?: { readonly round: number; readonly maxRounds: number; readonly findings: string; readonly previous: unknown };
}

/**
 * A plan function: returns (or resolves to) a JSON value: `null`, a boolean, a finite number, a
 * string, an array or a plain object of them. Not JSON: `undefined`, functions, symbols, BigInt,
 * NaN and Infinity, Dates, Maps, Sets, class instances, typed arrays, cycles: the task then fails
 * at once, naming where the value is not JSON. A thrown error retries with the task's retry policy;
 * a `NonRetryableError` fails the task at once.
 */
export type SwarmFunction = (ctx: FnContext) => unknown;

/** Functions by the name plans give them (`"fn": "fetchOrders"`). */
export type SwarmFunctions = Readonly<Record<string, SwarmFunction>>;
