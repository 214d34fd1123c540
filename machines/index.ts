/**
 * The swarmstate statecharts: pure XState v5 machines with no I/O. Each declares its effects by
 * name (`report`, the agent's `callModel`/`abortCall` actions made by `modelCallActions`,
 * `executeTool`) for `machine.provide(...)`; paste any of them into
 * the Stately editor, walk it with @xstate/graph, or drive it with fake actors in tests.
 */
export { agentMachine, modelCallActions, type AgentContext, type AgentEvent, type AgentInput, type RunModelCall } from './agent/index.js';
export { breakerMachine, type BreakerInput } from './breaker.machine.js';
export { keyMachine, type KeyInput } from './key.machine.js';
export { poolMachine, type PoolInput } from './pool.machine.js';
export { supervisorMachine, type SupervisorContext, type SupervisorEvent, type SupervisorInput } from './supervisor/machine.js';
export { groupMachine, type GroupInput } from './supervisor/group.machine.js';
export { toolBusMachine, type ToolBusInput } from './toolBus.machine.js';
export { RunTable } from './tasks/runTable.js';
export type { RunResult, RunTotals, TaskResult } from './tasks/results.js';
export type { SupervisedTask } from './tasks/types.js';
export { taskLifecycleMachine } from './tasks/task.machine.js';
export { nowOf, realClock, type TimedClock } from './clock.js';
export { canonicalJson, toolCallKey } from './canonical.js';
export * from './protocol.js';
