/**
 * The agent's actions around tool calls: the beforeToolCall hook's decisions, one bus request per
 * allowed call, the results as they come, and the results back into the conversation in the
 * model's order. Each does one assign.
 */
import { errorInfo } from '../errors.js';
import { enqueueReport } from '../kit.js';
import type { ContentBlock, ToolBusEvent, ToolCallDecision } from '../protocol.js';
import { toolCallInfosOf, toolCallsOf, type ActionArgs, type AgentContext, type PatchArgs, type ToolWait } from './context.js';

/** One bus request per tool call; calls to tools the task may not use get an error result. */
export const callTools = ({ context, enqueue, self, system }: ActionArgs) => {
  const calls = toolCallsOf(context);
  const wait: ToolWait = { order: calls.map((c) => c.id), results: {}, left: calls.length };
  const allowed = new Set(context.input.tools);
  const bus = system.get('toolBus');
  for (const call of calls) {
    if (!allowed.has(call.name) || !bus) {
      const reason = !allowed.has(call.name) ? `task "${context.input.taskId}" may not use tool "${call.name}"` : 'no tool bus in the run';
      wait.results[call.id] = { content: `tool "${call.name}" is not available: ${reason}`, isError: true };
      wait.left--;
      enqueueReport(enqueue, { type: 'tool:denied', taskId: context.input.taskId, name: call.name, reason });
      continue;
    }
    const decision = context.toolDecisions?.[call.id];
    if (decision?.action === 'deny') {
      wait.results[call.id] = { content: `tool "${call.name}" was denied: ${decision.reason}`, isError: true };
      wait.left--;
      enqueueReport(enqueue, { type: 'tool:denied', taskId: context.input.taskId, name: call.name, reason: decision.reason });
      continue;
    }
    const args = decision?.action === 'rewrite' ? decision.args : call.input;
    const event: ToolBusEvent = { type: 'TOOL.CALL', callId: call.id, taskId: context.input.taskId, name: call.name, args, replyTo: self };
    enqueue.sendTo(bus, event);
  }
  enqueue.assign({ tools: wait, toolDecisions: null });
};

/** Keeps the tool hook's decisions for callTools, and records each (a hook that throws denies all). */
export const recordToolDecisions = ({ context, event, enqueue }: ActionArgs, params: { error: string } | undefined) => {
  const infos = toolCallInfosOf(context);
  const output = params ? undefined : (event as unknown as { output?: ToolCallDecision[] }).output;
  const decisions: Record<string, ToolCallDecision> = {};
  infos.forEach((info, i) => {
    const d = output?.[i];
    const decision: ToolCallDecision = params
      ? { action: 'deny', reason: `the hook threw: ${params.error}` }
      : d && (d.action === 'allow' || d.action === 'deny' || d.action === 'rewrite')
        ? d
        : { action: 'deny', reason: 'the hook gave no decision for this call' };
    decisions[info.callId] = decision;
    enqueueReport(enqueue, {
      type: 'tool:decision',
      taskId: info.taskId,
      attempt: info.attempt,
      turn: info.turn,
      callId: info.callId,
      tool: info.tool,
      decision: decision.action,
      ...(decision.action !== 'allow' && decision.reason ? { reason: decision.reason } : {}),
    });
  });
  enqueue.assign({ toolDecisions: decisions });
};

/** One result in (a repeated or unknown call id changes nothing). */
export const recordToolResult = ({ context, event }: PatchArgs): Partial<AgentContext> => {
  const wait = context.tools;
  if (!wait || event.type !== 'TOOL.RESULT') return {};
  if (event.callId in wait.results || !wait.order.includes(event.callId)) return {};
  return {
    tools: {
      ...wait,
      results: { ...wait.results, [event.callId]: { content: event.content, isError: event.isError } },
      left: wait.left - 1,
    },
  };
};

/** The results as one user message, in the order the model asked for them, errors flagged. */
function withToolResults(context: AgentContext): Pick<AgentContext, 'messages' | 'tools'> {
  const wait = context.tools!;
  const content: ContentBlock[] = wait.order.map((id) => {
    const r = wait.results[id]!;
    return r.isError
      ? { type: 'tool_result', toolUseId: id, content: r.content, isError: true }
      : { type: 'tool_result', toolUseId: id, content: r.content };
  });
  return { messages: [...context.messages, { role: 'user' as const, content }], tools: null };
}

/** Every result is in: they join the conversation for the next turn. */
export const appendToolResults = ({ context }: PatchArgs): Partial<AgentContext> => withToolResults(context);

/** Every result is in, but the task has used its last turn: the transcript keeps them, the attempt fails. */
export const outOfTurns = ({ context }: PatchArgs): Partial<AgentContext> => ({
  ...withToolResults(context),
  error: errorInfo('max_turns', `task "${context.input.taskId}" reached maxTurns (${context.input.maxTurns}) without a final answer`),
});
