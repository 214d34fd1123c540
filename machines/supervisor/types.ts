/** The supervisor's input, context and events, and what its helpers share. */
import type { DoneActorEvent, ErrorActorEvent } from 'xstate';
import type { CallTarget } from '../agent/index.js';
import type { BreakerInput } from '../breaker.machine.js';
import type { CacheGroups } from '../cacheGroups.js';
import type { LedgerBudgets, LedgerNews } from '../ledger.machine.js';
import type { Group } from '../mapReduceSteps.js';
import type { ApprovalDecision, AttemptReport, CacheWarmEvent, KeyLimits, RunStatus, Usage } from '../protocol.js';
import type { RunRestore } from '../tasks/restore.js';
import type { RunResult } from '../tasks/results.js';
import type { RunTable } from '../tasks/runTable.js';
import type { SupervisedTask } from '../tasks/types.js';
import type { ToolBusInput, ToolBusStats } from '../toolBus.machine.js';
import type { Crew } from './crew.js';

export interface SupervisorInput {
  runId: string;
  tasks: SupervisedTask[];
  providers: { name: string; keys: { keyId: string; limits: KeyLimits; probation?: boolean; maxRateLimitedMs?: number }[] }[];
  /** One breaker per route `<provider>/<model>`. */
  routes: BreakerInput[];
  /** The tool bus: its tools and its batching, caching and timeout settings. */
  toolBus: ToolBusInput;
  maxInFlight: number;
  /** Caps per model (the plan's model names) on tasks running at once, beside maxInFlight. */
  modelMaxInFlight?: Record<string, number>;
  onFailure: 'continue' | 'fail-fast';
  backoff: { baseMs: number; maxMs: number };
  /** 429s one attempt may wait out before it fails; unset: only its deadline bounds them. */
  maxRateLimitWaits?: number;
  seed: number;
  /** The model that writes compaction summaries, if the plan names one. */
  compaction?: CallTarget;
  /** Budgets: with any, a ledger joins the run and every priced call reserves its worst case. */
  budgets?: LedgerBudgets;
  /** The run has a beforeDispatch hook: every model call asks it first. */
  hooked?: boolean;
  /** The run has a beforeToolCall hook: every tool call asks it first. */
  toolHooked?: boolean;
  /** Messages an agent keeps at the end when it compacts. */
  keepLast?: number;
  /** Cache-aware fan-out: how long a written prefix stays readable (ms). Default 300000. */
  cacheTtlMs?: number;
  /** A resumed run: what its earlier life had done (finished tasks are not run again). */
  restore?: RunRestore;
  /** Agents per group actor (default AGENTS_PER_GROUP); tests set it small to see several groups. */
  agentsPerGroup?: number;
  /** Decisions on approvals made before this life of the run (journaled while it was paused). */
  decisions?: Record<string, ApprovalDecision>;
  /** Approvals that wait keep the run going (it never pauses): for a page or code that will decide. */
  holdApprovals?: boolean;
}

/** A planner's output, to be checked and turned into sub-tasks by the `expandPlan` actor. */
export interface PlanExpansionInput {
  taskId: string;
  attempt: number;
  output: string;
  /** The planner's depth (its sub-tasks are one deeper). */
  depth: number;
  /**
   * A map: its prompt and system as written, its deps (not `from`) and their outputs (in the same
   * order) for each item's one pass, and the `from` task's output.
   */
  map?: { prompt: string; system?: string; deps: string[]; outputs: string[]; itemsText?: string };
  /** A reduce, or a group of one that splits: the groups of its tree (the root last). */
  reduce?: { groups: Group[] };
}

/** The sub-tasks, ready to join the run, or every problem with the output (it is then rejected). */
export type PlanExpansion = { ok: true; tasks: SupervisedTask[] } | { ok: false; issues: string[] };

export interface SupervisorContext {
  runId: string;
  table: RunTable;
  /** The group actors the agents run under, how many agents each holds, and the attempts in flight. */
  crew: Crew;
  maxInFlight: number;
  onFailure: 'continue' | 'fail-fast';
  backoff: { baseMs: number; maxMs: number };
  maxRateLimitWaits: number | undefined;
  seed: number;
  compaction: SupervisorInput['compaction'];
  /** The run has a dispatch hook (`beforeDispatch`), a tool-call hook (`beforeToolCall`): its agents ask them. */
  hooks: { dispatch: boolean; tool: boolean };
  keepLast: number | undefined;
  startedAt: number;
  /**
   * What the run's infrastructure is made of (spawned once, at the start), and the route names
   * (`<provider>/<model>`) by provider and model, each built once.
   */
  infra: Pick<SupervisorInput, 'providers' | 'routes' | 'toolBus' | 'budgets'> & { routeNames: Map<string, Map<string, string>> };
  /** Cache-aware fan-out: groups of tasks sharing a prompt prefix. */
  groups: CacheGroups;
  /** Planner outputs being expanded: actor id -> the attempt it came from. */
  expanding: Map<string, { taskId: string; attempt: number; output: string; usage: Usage }>;
  /** Why the run stopped early, if it did. */
  stop: { status: Extract<RunStatus, 'failed' | 'cancelled'>; reason: string } | null;
  /**
   * What other actors told the supervisor for the result, by event (never read from their
   * snapshots): the run budget refused a reservation (the ledger's LEDGER.RUN_DENIED), a call's
   * settlement took the run's spend over its budget (LEDGER.RUN_OVERSPENT), and the bus's
   * counters (asked for as the run closes).
   */
  told: { runBudgetDenied: boolean; runOverspent: boolean; tools: ToolBusStats | undefined };
  result: RunResult | null;
  approvals: {
    /** Decisions made before their approval waits (a paused run's, read back by a resume): applied when it does. */
    early: Map<string, ApprovalDecision>;
    /** Keep running while approvals wait (a person is at the page, or code decides): never pause. */
    hold: boolean;
    /** Nothing could run but approvals waiting for a decision: the run ends `paused`. */
    paused: boolean;
  };
}

/** A group's report that one of its agents ended (a crash is a failed report). */
export interface AgentEndedEvent {
  type: 'AGENT.ENDED';
  /** The index of the group the agent ran in. */
  group: number;
  report: AttemptReport;
}

export type SupervisorEvent =
  | { type: 'CANCEL'; reason?: string }
  | LedgerNews
  /** The bus's answer to TOOL.STATS.ASK (raised without stats when the bus is gone). */
  | { type: 'TOOL.STATS'; stats?: ToolBusStats }
  | CacheWarmEvent
  | AgentEndedEvent
  /** A decision on a waiting approval (src checks that it waits before sending). */
  | { type: 'APPROVAL.DECIDE'; taskId: string; decision: ApprovalDecision }
  /** An approval's timeoutMs passed (scheduled by the supervisor for the round it asked). */
  | { type: 'APPROVAL.TIMEOUT'; taskId: string; round: number }
  | DoneActorEvent<unknown, string>
  | ErrorActorEvent<unknown, string>;

/** What the supervisor's helpers need of enqueueActions' `enqueue`: run an action, assign context, spawn. */
export type Enqueue = ((action: unknown) => void) & {
  assign(values: Partial<SupervisorContext>): void;
  spawnChild(src: 'group' | 'expandPlan', options: { id: string; input: unknown }): void;
  sendTo(to: unknown, event: unknown): void;
  raise(event: SupervisorEvent, options?: { id?: string; delay?: number }): void;
  cancel(id: string): void;
};
