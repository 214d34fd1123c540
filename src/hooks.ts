/**
 * The dispatch contract's hooks: code of the embedder (`createSwarm({ hooks })`) or of the plan
 * (`hooks.module`, a module exporting `beforeDispatch`) that sees every model call before it is
 * sent and allows it, denies it, or rewrites it (another model of the plan, a smaller maxTokens,
 * trimmed messages). A hook that throws denies; every decision is a `dispatch:decision` event.
 *
 * @example
 * createSwarm({ hooks: { beforeDispatch: (call) =>
 *   call.estimatedCostUsd !== undefined && call.estimatedCostUsd > 0.5 ? { action: 'rewrite', model: 'cheap' } : undefined } });
 */
import { pathToFileURL } from 'node:url';
import { isAbsolute, resolve } from 'node:path';
import type { DispatchDecision, DispatchInfo, Message, ToolCallDecision, ToolCallInfo } from '../machines/protocol.js';
import type { CallTarget } from '../machines/agent/index.js';

/** What a hook may answer. Nothing (or true) allows, false denies. */
export type HookAnswer =
  | void
  | boolean
  | { action: 'allow' }
  | { action: 'deny'; reason?: string }
  | { action: 'rewrite'; model?: string; maxTokens?: number; messages?: Message[]; reason?: string };

export type BeforeDispatch = (call: DispatchInfo) => HookAnswer | Promise<HookAnswer>;

/** What a tool hook may answer. Nothing (or true) allows, false denies. */
export type ToolHookAnswer = void | boolean | { action: 'allow' } | { action: 'deny'; reason?: string } | { action: 'rewrite'; args: unknown; reason?: string };

export type BeforeToolCall = (call: ToolCallInfo) => ToolHookAnswer | Promise<ToolHookAnswer>;

export interface Hooks {
  beforeDispatch?: BeforeDispatch;
  /** Sees every tool call before it goes to the tool bus: allow, deny (an error result), or new arguments. */
  beforeToolCall?: BeforeToolCall;
}

/** A tool hook's answer as the agent applies it. */
export function toolDecisionOf(answer: ToolHookAnswer): ToolCallDecision {
  if (answer === undefined || answer === true) return { action: 'allow' };
  if (answer === false) return { action: 'deny', reason: 'denied by the beforeToolCall hook' };
  if (answer.action === 'allow') return { action: 'allow' };
  if (answer.action === 'deny') return { action: 'deny', reason: answer.reason ?? 'denied by the beforeToolCall hook' };
  if (answer.action === 'rewrite') return answer.reason === undefined ? { action: 'rewrite', args: answer.args } : { action: 'rewrite', args: answer.args, reason: answer.reason };
  return { action: 'deny', reason: 'the hook answered something that is not allow, deny or rewrite' };
}

/** The hook's answer as the agent applies it; a rewrite names a model of the plan, resolved here. */
export function decisionOf(answer: HookAnswer, targetOf: (model: string) => CallTarget | undefined): DispatchDecision {
  if (answer === undefined || answer === true) return { action: 'allow' };
  if (answer === false) return { action: 'deny', reason: 'denied by the beforeDispatch hook' };
  if (answer.action === 'allow') return { action: 'allow' };
  if (answer.action === 'deny') return { action: 'deny', reason: answer.reason ?? 'denied by the beforeDispatch hook' };
  if (answer.action === 'rewrite') {
    const decision: DispatchDecision = { action: 'rewrite' };
    if (answer.reason !== undefined) decision.reason = answer.reason;
    if (answer.model !== undefined) {
      const target = targetOf(answer.model);
      if (!target) return { action: 'deny', reason: `the hook rewrote the call to model "${answer.model}", which the plan does not have` };
      decision.target = target;
    }
    if (answer.maxTokens !== undefined) {
      if (!Number.isInteger(answer.maxTokens) || answer.maxTokens < 1) return { action: 'deny', reason: `the hook asked for maxTokens ${String(answer.maxTokens)}` };
      decision.maxTokens = answer.maxTokens;
    }
    if (answer.messages !== undefined) {
      if (!Array.isArray(answer.messages) || answer.messages.length === 0) return { action: 'deny', reason: 'the hook trimmed the messages to nothing' };
      decision.messages = answer.messages;
    }
    return decision;
  }
  return { action: 'deny', reason: 'the hook answered something that is not allow, deny or rewrite' };
}

/** Loads a plan's hook module (a path relative to `base`): its `beforeDispatch` and `beforeToolCall` exports. */
export async function loadHookModule(path: string, base: string): Promise<Hooks> {
  const file = isAbsolute(path) ? path : resolve(base, path);
  const mod = (await import(pathToFileURL(file).href)) as Partial<Hooks> & { default?: Partial<Hooks> };
  const beforeDispatch = mod.beforeDispatch ?? mod.default?.beforeDispatch;
  const beforeToolCall = mod.beforeToolCall ?? mod.default?.beforeToolCall;
  if (typeof beforeDispatch !== 'function' && typeof beforeToolCall !== 'function') {
    throw new Error(`hooks.module ${path}: exports neither a beforeDispatch nor a beforeToolCall function`);
  }
  return { ...(typeof beforeDispatch === 'function' ? { beforeDispatch } : {}), ...(typeof beforeToolCall === 'function' ? { beforeToolCall } : {}) };
}
