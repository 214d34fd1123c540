/** The agent: one attempt at one task. The chart is machine.ts; what others import is here. */
export { agentMachine } from './machine.js';
export { handBack, routeOf, type AgentContext, type AgentEvent, type AgentInput, type CallTarget, type ToolWait } from './context.js';
export { modelCallActions, type ModelCallEvent, type ModelCallIo, type RunModelCall } from './modelCall.js';
