/**
 * The shapes the run table keeps and hands out: a task as the supervisor runs it, its record in
 * the table, why it runs again (feedback), and what settling an attempt did (a settlement).
 */
import type { CallTarget } from '../agent/index.js';
import type { Price } from '../cost.js';
import type { MapSpec, ReduceSpec } from '../mapReduce.js';
import type { ErrorInfo, Message, OutputCheckSpec, SkipCause, TaskStatus, Usage } from '../protocol.js';
import { ZERO_USAGE } from '../protocol.js';
import type { Condition } from '../when.js';

/** A task as the supervisor runs it: the plan's task, resolved (model, limits, defaults). */
export interface SupervisedTask {
  id: string;
  deps: string[];
  priority: number;
  /** Tasks on the longest chain from this one to the end of the DAG, itself included. */
  rank: number;
  /** The plan's name for the model (e.g. "fast"). */
  modelName: string;
  provider: string;
  /** The provider's model id. */
  model: string;
  maxTokens: number;
  system?: string;
  prompt: string;
  tools: string[];
  maxTurns: number;
  maxRetries: number;
  timeoutMs: number;
  /** Most input tokens one request may carry (context window less maxTokens, or the task's cap). */
  inputBudget?: number;
  /** The model's price, USD per million tokens (plan or built-in). */
  price?: Price;
  /** Its model's fallbacks, in order. */
  fallbacks?: CallTarget[];
  /** Weighted routes of its model: each attempt picks one (seeded). */
  routes?: (CallTarget & { weight: number })[];
  /** Estimated tokens of its tools' definitions, sent with every turn. */
  toolTokens?: number;
  /**
   * `plan`: its output is a list of sub-tasks that join the run. `review`: it reviews `reviews`.
   * `map`, `reduce`: aggregators (machines/mapReduce.ts), with `map` or `reduce` set. `fn`: runs
   * the function `fn` (machines/kinds/fn.ts), no model. `approval`: waits for a person's decision
   * on `reviews` (the task it approves; machines/kinds/approval.ts).
   */
  kind?: 'plan' | 'review' | 'map' | 'reduce' | 'fn' | 'approval';
  /** `fn`: the function's name; also on a map whose items run it, and a reduce that merges with it. */
  fn?: string;
  /** A map's item, for a `fn` item step (`ctx.item`). */
  item?: unknown;
  /** `approval`: what the person is asked. */
  question?: string;
  /** `approval`: how long a decision may take (its `timeoutMs`); then it ends as rejected. None by default. */
  decisionTimeoutMs?: number;
  map?: MapSpec;
  reduce?: ReduceSpec;
  /** The task a review task reviews, or an approval approves (one of its deps). */
  reviews?: string;
  /** Reviews a review task makes at most (each but the last may send the work back). Default 2. */
  maxRounds?: number;
  /** 0 for the plan's own tasks; a planner's sub-tasks are one deeper. */
  depth?: number;
  /** The planner task that made this one. */
  parent?: string;
  /** Goes out through cache-aware fan-out (its route has explicit cache breakpoints). */
  cacheFanOut?: boolean;
  /** The shortest prefix its model caches (fan-out holds nothing back for shorter ones). Default 1024. */
  cacheMinTokens?: number;
  /**
   * Its provider does not count cache reads against the key's input tokens per minute (Anthropic
   * documents this for ITPM): a task of a warm group leases a key for what it does not read.
   */
  cacheReadsFree?: boolean;
  /** What each final answer is checked against: a structured output's schema, `accept`'s minChars and pattern. */
  output?: OutputCheckSpec;
  /** `accept.judge`: the model that scores an answer that passed its checks, its criteria and passing score. */
  judge?: CallTarget & { prompt: string; threshold: number };
  /**
   * Runs only if this holds of its deps' outputs (machines/when.ts), decided once, when it would
   * become ready; false: it is skipped with the cause `condition`.
   */
  when?: Condition;
  /** `any`: a join. It runs once every dep has ended and at least one completed. Absent: every dep must complete. */
  after?: 'any';
}

/** Why a task runs again: a reviewer's findings, or the problems of a rejected plan. */
export type Feedback =
  | { kind: 'review'; round: number; maxRounds: number; draft: string; findings: string }
  | { kind: 'plan'; issues: string[] }
  /** The last answer failed its output schema or a quality gate (`invalid_output`, `rejected_output`). */
  | { kind: 'output'; code: 'invalid_output' | 'rejected_output'; draft: string; problems: string[] };

/** What a review task's verdict did. */
export interface ReviewOutcome {
  target: string;
  round: number;
  maxRounds: number;
  verdict: 'approve' | 'revise';
  findings?: string;
  /** No more rounds: the reviewer approved, or `maxRounds` reviews were made. */
  final: boolean;
}

/** One task's row in the table. Mutable on purpose (see RunTable). */
export interface TaskRecord {
  spec: SupervisedTask;
  /** Set only by `TaskStates.move` (lifecycle.ts), which checks each change against the table. */
  status: TaskStatus;
  /** Dependencies not yet completed. */
  waitingOn: number;
  dependents: TaskRecord[];
  /** FIFO tie-break: when it became ready. */
  readySeq: number;
  /** Attempt numbers taken (a map's or reduce's own steps take one too): what the next attempt is numbered after. */
  attempts: number;
  /** Agents started for it: the attempts it reports (over every life of the run). */
  started: number;
  /** Every retry it took, over every life of the run: what it reports. */
  retries: number;
  /**
   * The retries that count against its `maxRetries`: those since its last `retry` session (which
   * gives it a fresh budget), within an attempt and new attempts alike, and attempts a crash cut short.
   */
  retriesCounted: number;
  usage: Usage;
  requests: number;
  output?: string;
  error?: ErrorInfo;
  transcript?: Message[];
  servedBy?: string;
  costUsd: number;
  unpricedCalls: number;
  /** Review task: reviews made. Reviewed task: times sent back. */
  rounds: number;
  /** Why the next attempt runs again (findings, a rejected plan's problems). */
  feedback?: Feedback;
  approved?: boolean;
  subtasks?: string[];
  /** An aggregator that expanded: the sub-tasks it waits for and reads (a map's items, a reduce's root). */
  collect?: string[];
  /** A map that completed: the items whose outputs it kept (after `dedupe`), and how many it dropped. */
  kept?: string[];
  dropped?: number;
  /** Set aside by cache-aware fan-out (queued, but neither in the heap nor parked). */
  held: boolean;
  /** Skipped: why, in a code and in words. */
  skip?: { cause: SkipCause; reason: string };
  /** Its condition and, for a join, its deps were judged: whenever it is ready again, it just is. */
  opened?: true;
}

/** What settling an attempt did to the run. */
export type Settlement =
  /** `skipped`: what its completion skipped (a false condition, and what depended on that), when anything. */
  | { kind: 'completed'; unlocked: string[]; review?: ReviewOutcome; skipped?: string[] }
  /** A planner's attempt produced its output: the task stays running until the output is expanded or rejected. */
  | { kind: 'plan'; output: string }
  /** A reviewer asked for changes: the reviewed task is queued again, the reviewer waits for it. */
  | { kind: 'revise'; review: ReviewOutcome }
  | { kind: 'retry' }
  /** An aggregator expanded into sub-tasks (`unlocked`: those ready now); it waits for them. */
  | { kind: 'expanded'; unlocked: string[] }
  /** `unlocked`: joins its failure let run (their last dep ended, another had completed), when any. */
  | { kind: 'failed'; skipped: string[]; unlocked?: string[] }
  | { kind: 'cancelled' }
  | { kind: 'stale' };

export const isAggregator = (spec: SupervisedTask): boolean => spec.kind === 'map' || spec.kind === 'reduce';

/** A task's record as it joins the table: pending, nothing spent. */
export function newRecord(spec: SupervisedTask): TaskRecord {
  return {
    spec,
    status: 'pending',
    waitingOn: 0,
    dependents: [],
    readySeq: 0,
    attempts: 0,
    started: 0,
    retries: 0,
    retriesCounted: 0,
    usage: ZERO_USAGE,
    requests: 0,
    costUsd: 0,
    unpricedCalls: 0,
    rounds: 0,
    held: false,
  };
}
