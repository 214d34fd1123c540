/** Run events: what the machines report through their `report` action (src turns them into the public event stream), and the statuses they name. */
import type { ErrorInfo, KeyLimits, Usage } from './data.js';
import type { ModelCallOutput, StopReason } from './conversation.js';
import type { BudgetKind } from './ledger.js';

export type RunEvent =
  | {
      type: 'run:started';
      runId: string;
      tasks: number;
      /** What a report needs to read the rest of the stream: routes, prices, keys and limits. */
      models?: Record<string, { provider: string; model: string; price?: { input: number; output: number; cacheWrite?: number; cacheRead?: number } }>;
      keys?: Record<string, KeyLimits>;
      maxInFlight?: number;
      /** The plan's `budget.usd`, for views that show the spend against it. */
      budgetUsd?: number;
      /** Every task (in plan order) with its dependencies, for views that draw the DAG. */
      deps?: Record<string, string[]>;
      /** A resume or a retry: the tasks that had ended before this life, with how (they send no events of their own). */
      before?: Record<string, 'completed' | 'failed' | 'skipped'>;
      /** The run continues from its journal (a resume). */
      resumed?: boolean;
      /** A resume: tasks that had completed before (they send no events of their own). */
      alreadyCompleted?: number;
      /** A retry (`swarm.retry`): the tasks it sent back to pending (failed, skipped, cancelled, and what depends on them). */
      retried?: number;
      /**
       * A resume or a retry: what earlier lives of the run counted for each task that had counted
       * something (attempts, requests, retries, tokens, cost), so the views count the whole run.
       */
      restored?: Record<string, { model?: string; attempts: number; requests: number; retries: number; usage: Usage; costUsd: number }>;
      /** A resume or a retry: the maps and reduces that had expanded (containers, not tasks). */
      containers?: string[];
    }
  | { type: 'task:queued'; taskId: string }
  /** `fn`: a code step's function (its route is then `fn/<name>`; a provider named `fn` makes such routes too: read `fn`). */
  | { type: 'task:started'; taskId: string; attempt: number; model: string; route?: string; fn?: string }
  | { type: 'task:retry'; taskId: string; attempt: number; retry: number; delayMs: number; error: ErrorInfo }
  /** `usage`: this attempt's. `requests`, `retries`, `taskUsage`: the task's, over all its attempts (what the journal keeps). */
  | ({ type: 'task:completed'; taskId: string; attempt: number; output: string; usage: Usage } & Partial<TaskCounters>)
  /**
   * Opt-in (`createSwarm({ deltas: true })`), never journaled: a piece of a turn's text as it
   * streams in, in order. A call retried within the attempt (`task:retry`) streams again from its start.
   */
  | { type: 'task:delta'; taskId: string; attempt: number; turn: number; text: string }
  /**
   * `output`: the attempt's answer when it was rejected (`invalid_output`, `rejected_output`): the
   * journal keeps it, so a resumed retry's prompt shows it again and a task that failed for good keeps it.
   */
  | ({ type: 'task:failed'; taskId: string; attempt: number; error: ErrorInfo; willRetry: boolean; output?: string } & Partial<TaskCounters>)
  /**
   * `cause`: its condition (`when`) was false, or a dep did not complete; `reason` says which, in
   * words. A run always sends `cause`; an events file of an older version may lack it.
   */
  | { type: 'task:skipped'; taskId: string; reason: string; cause?: SkipCause }
  | { type: 'task:fallback'; taskId: string; attempt: number; from: string; to: string; reason: string }
  | { type: 'dispatch:decision'; taskId: string; attempt: number; turn: number; model: string; decision: 'allow' | 'deny' | 'rewrite'; reason?: string; to?: string; maxTokens?: number; messages?: number }
  | { type: 'tool:decision'; taskId: string; attempt: number; turn: number; callId: string; tool: string; decision: 'allow' | 'deny' | 'rewrite'; reason?: string }
  | { type: 'task:compacted'; taskId: string; attempt: number; mode: 'summary' | 'truncation'; removed: number; tokensBefore: number; tokensAfter: number }
  /** The counters: when an attempt of it was in flight (its requests count). */
  | ({ type: 'task:cancelled'; taskId: string } & Partial<TaskCounters>)
  /**
   * A planner task's sub-tasks joined the run (ids as they run: `<planner>/<id>`). `container`: a
   * map's items or a reduce's groups: the task runs none of its own and is a container from now on.
   */
  | { type: 'task:planned'; taskId: string; attempt: number; subtasks: string[]; depth: number; container?: boolean }
  /** A map with `dedupe` completed: of its items' outputs, `dropped` were duplicates. */
  | { type: 'task:deduped'; taskId: string; items: number; kept: number; dropped: number }
  /** A planner's output was not a valid list of sub-tasks: the attempt failed with these problems. */
  | { type: 'task:plan-rejected'; taskId: string; attempt: number; issues: string[] }
  /**
   * A review task's verdict on the task it reviews (`revise` sends it back for one more round).
   * The reviewer's counters come with a verdict that is not final (its attempt ends here).
   */
  | ({ type: 'task:reviewed'; taskId: string; attempt: number; target: string; round: number; maxRounds: number; verdict: 'approve' | 'revise'; findings?: string; final: boolean } & Partial<TaskCounters>)
  /** Cache-aware fan-out: this task goes first; `held` tasks sharing its prompt prefix wait for its response to start. */
  | { type: 'cache:lead'; taskId: string; group: string }
  /** The leader's response started (or it ended): the held tasks go out and read the cache. */
  | { type: 'cache:release'; taskId: string; group: string; released: number; warm: boolean }
  | { type: 'model:request'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string }
  /**
   * `costUsd`: the call's cost at its model's price (absent when unpriced), charged to the plan
   * model `modelName`. `stopReason`: why the reply ended; `response`: its id, the model that
   * answered and who served it, where the provider said them (the `chat` span's `gen_ai.response.*`).
   */
  | { type: 'model:response'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string; usage: Usage; costUsd?: number; modelName?: string; stopReason?: StopReason; response?: ModelCallOutput['response'] }
  /**
   * `costUsd`: a call that may have reached the server (a timeout, a reset, an error inside a 200
   * stream, a malformed reply) is charged its worst case, the amount a budget reserved for it,
   * at its model's price (absent when it was not billed, or unpriced), to the plan model `modelName`.
   */
  | { type: 'model:error'; taskId: string; attempt: number; turn: number; provider: string; model: string; keyId: string; error: ErrorInfo; costUsd?: number; modelName?: string }
  /** `callId`: the model's id of the call (its `tool_use` block's; the `execute_tool` span's `gen_ai.tool.call.id`). */
  | { type: 'tool:called'; taskId: string; name: string; shared: boolean; cached?: boolean; callId?: string }
  | { type: 'tool:result'; name: string; isError: boolean; durationMs?: number; timedOut?: boolean; batch?: number; cancelled?: boolean }
  | { type: 'tool:denied'; taskId: string; name: string; reason: string }
  | { type: 'key:state'; keyId: string; state: KeyState }
  | { type: 'key:backoff'; keyId: string; retryAfterMs: number }
  /**
   * The request rate a key paces at changed: `rpm` per minute (null: not paced), from the plan
   * (`stated`), the server's headers (`learned`) or a 429 (`adaptive`: cut, then raised slowly).
   */
  | { type: 'key:rate'; keyId: string; rpm: number | null; source: 'stated' | 'learned' | 'adaptive' | 'none' }
  | { type: 'key:revoked'; keyId: string }
  /**
   * A key met nothing but 429s for its provider's `maxRateLimitedMs` (`rateLimitedMs`, from its
   * first 429 of the run, `responses` of them) and is out of service for the run.
   */
  | { type: 'key:set-aside'; keyId: string; provider: string; rateLimitedMs: number; responses: number }
  | { type: 'breaker:open'; route: string; cooldownMs: number; failures: number }
  | { type: 'breaker:halfOpen'; route: string }
  | { type: 'breaker:closed'; route: string }
  | {
      type: 'budget:denied';
      taskId: string;
      model: string;
      amountUsd: number;
      budget: BudgetKind;
      limitUsd: number;
      spentUsd: number;
      reservedUsd: number;
    }
  /**
   * A call cost more than it reserved (`actualUsd` above `reservedUsd`), and its settlement left
   * this budget's settled spend (`spentUsd`) over its `limitUsd`. One per budget it took over; a
   * run budget overrun ends the run `budget_exceeded`.
   */
  | {
      type: 'budget:overrun';
      taskId: string;
      model: string;
      reservedUsd: number;
      actualUsd: number;
      budget: BudgetKind;
      limitUsd: number;
      spentUsd: number;
    }
  /**
   * An approval task waits for a person: `draft` is the output of the task it approves, as it
   * stands. `round` counts its requests (a rejection with a note sends the draft back, then asks again).
   */
  | { type: 'approval:requested'; taskId: string; attempt: number; approves: string; prompt: string; draft: string; round: number; maxRounds: number; timeoutMs?: number }
  /**
   * A decision on a waiting approval. `by`: where it came from (`cli`, `ui`, `code`, or `timeout`
   * when its timeoutMs passed); `at`: when it was made (ms since the epoch); `edited`: the decision
   * replaced the approved task's output; `outcome`: what it did (`approved`, `revise`: the draft
   * goes back with the note, `rejected`: the approval fails).
   */
  | {
      type: 'approval:decided';
      taskId: string;
      attempt: number;
      approves: string;
      round: number;
      approved: boolean;
      note?: string;
      by: DecisionSource;
      /** When the decision was made (ms since the epoch): a decision written to a paused run's journal is older than the event, whose `at` is when the run applied it. */
      decidedAt: number;
      edited?: boolean;
      /** The edited output (journaled: a resume reads the approved task's output as edited). */
      output?: string;
      outcome: 'approved' | 'revise' | 'rejected';
    }
  | { type: 'run:cancelled'; reason: string }
  | { type: 'run:completed'; status: RunStatus };

/** A task's counters over all its attempts, every life of the run: what an event that ends an attempt carries for the journal. */
export interface TaskCounters {
  requests: number;
  retries: number;
  taskUsage: Usage;
}

/** Why a task was skipped: its `when` was false, or a task it needs did not complete (failed, or was skipped). */
export type SkipCause = 'condition' | 'dependency';

export type KeyState = 'ready' | 'saturated' | 'backoff' | 'revoked' | 'setAside';
/** `paused`: nothing could run but approvals waiting for a person; `resume` continues it. */
export type RunStatus = 'completed' | 'partial' | 'failed' | 'cancelled' | 'budget_exceeded' | 'paused';
/** `waiting`: an approval task waits for a person's decision. */
export type TaskStatus = 'pending' | 'queued' | 'running' | 'waiting' | 'completed' | 'failed' | 'skipped' | 'cancelled';

/** Where an approval's decision came from. */
export type DecisionSource = 'cli' | 'ui' | 'code' | 'timeout';

/** A person's decision on an approval task (or its timeout's). */
export interface ApprovalDecision {
  approved: boolean;
  /** Why; with a rejection and rounds left, the note sends the approved task back for another attempt. */
  note?: string;
  /** An edited output: it replaces the approved task's output (approval only). */
  output?: string;
  by: DecisionSource;
  /** When it was made (ms since the epoch). */
  at: number;
}
