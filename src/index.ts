/**
 * swarmstate: run many LLM sub-agents in parallel over a DAG of tasks, reliably and within
 * budget, as an actor system on XState v5.
 *
 * @example
 * import { createSwarm } from 'swarmstate';
 * const swarm = createSwarm();
 * const result = await swarm.run(plan).result;
 */
export { createSwarm, RunLockedError, type ResumeOptions, type RetryOptions, type RunEvents, type RunHandle, type RunOptions, type Swarm, type SwarmOptions, type TimedRunEvent } from './swarm.js';
export type { RunEventStream } from './swarm.js';
export { EventStreamOverflowError, type StreamOptions } from './run/eventStream.js';
export { openStore, MemoryStore, SqliteStore, StoreError, JournalRowError, type Store, type RunSummary, type RunRecord, type RowDamage, type PruneRule, type PruneResult } from './store/index.js';
export { PlanValidationError, parsePlan, validatePlan, type ApprovalOutput, type Plan, type PlanInput, type PlanIssue } from './plan/index.js';
export type { OutputOf, OutputsOf, ResultOf, TypedRunResult } from './plan/typed.js';
export { RetryError, type RetryErrorCode, type RetrySession } from './run/retry.js';
export { definePlan, type DefinedPlan, type TaskInput } from './plan/define.js';
export { ProviderError } from './providers/errors.js';
export { NonRetryableError } from './fn/errors.js';
export { ApprovalError, type ApprovalErrorCode } from './run/approvals.js';
export type { FnContext, SwarmFunction, SwarmFunctions } from './fn/types.js';
export { createScriptedProvider, type ScriptReply, type ScriptedProvider, type ScriptedProviderOptions } from './providers/scripted.js';
export { createAnthropicProvider, type AnthropicProviderOptions } from './providers/anthropic.js';
export { createOpenAIProvider, type OpenAIProviderOptions } from './providers/openai.js';
export { createAiSdkProvider, type AiSdkLanguageModel, type AiSdkModelSource, type AiSdkProviderOptions } from './providers/aisdk.js';
export type { ProviderObject } from './providers/registry.js';
export type { SimOptions, SimServer, SimStats } from './sim/index.js';
export type { Provider, ProviderKey, ProviderRequest, ToolSpec } from './providers/types.js';
export type { AiSdkSchemaLike, StandardSchemaLike, ToolCallContext, ToolDefinition, ToolInputSchema } from './tools/local.js';
export { ToolDefinitionError, type AiSdkToolCallOptions, type AiSdkToolLike, type SwarmTool, type SwarmToolEntry, type SwarmTools } from './tools/define.js';
export type { BeforeDispatch, BeforeToolCall, HookAnswer, Hooks, ToolHookAnswer } from './hooks.js';
export type { DispatchInfo, DispatchDecision, ToolCallInfo, ToolCallDecision } from '../machines/protocol.js';
export type { RunResult, RunTotals, TaskResult } from '../machines/tasks/results.js';
export type { ErrorCode, ErrorInfo, RunEvent, RunStatus, TaskStatus, Usage, Message, ContentBlock } from '../machines/protocol.js';
export { realClock, type TimedClock } from '../machines/clock.js';
export { buildReport } from './report/html.js';
export type { LiveUi, LiveUiOptions } from './ui/live.js';
// Loaded on their first call (issue 27): the simulator, the live page, the events file reader.
export { readEvents, startLiveUi, startSim } from './lazyExports.js';
export { RunTools, ToolSetupError } from './tools/registry.js';
export { connectMcpServer } from './tools/connect.js';
export { MissingPackageError } from './util/optional.js';
export { SqliteDriverError, type SqliteDriverName } from './store/driver.js';
