/**
 * An in-process provider driven by a function: for tests, benchmarks and embedders who want to
 * see the runtime work without a server. Throw a ProviderError from the script to inject a fault.
 * `request.onResponseStart` is called once the script has answered, just before the call resolves
 * (never when the script throws).
 *
 * @example
 * const provider = createScriptedProvider({
 *   reply: (req) => `echo: ${req.meta.taskId}`,
 * });
 */
import type { ContentBlock, ModelCallOutput, Usage } from '../../machines/protocol.js';
import { estimateRequestTokens, estimateTextTokens } from '../../machines/tokens.js';
import { asProviderError } from './errors.js';
import { type Provider, type ProviderRequest, responseStartNotifier } from './types.js';

export type ScriptReply =
  | string
  | { text?: string; toolCalls?: { name: string; input: unknown; id?: string }[]; usage?: Partial<Usage> }
  | ModelCallOutput;

export interface ScriptedProviderOptions {
  /** The reply to one call; may throw a ProviderError. `n` counts this provider's calls from 0. */
  reply: (request: ProviderRequest, n: number) => ScriptReply | Promise<ScriptReply>;
  /** Simulated latency per call, in ms (real time; honours the abort signal). Default 0. */
  latencyMs?: number | ((request: ProviderRequest) => number);
  /** The `type` the provider reports. Default "scripted". */
  type?: string;
}

export interface ScriptedProvider extends Provider {
  /** Calls made so far. */
  readonly calls: number;
}

const isOutput = (r: ScriptReply): r is ModelCallOutput => typeof r === 'object' && 'content' in r && 'stopReason' in r;

/** Turns a script's reply into a normalized response, estimating usage where the script gave none. */
export function toModelOutput(request: ProviderRequest, reply: ScriptReply, n: number): ModelCallOutput {
  if (typeof reply !== 'string' && isOutput(reply)) return reply;
  const r = typeof reply === 'string' ? { text: reply } : reply;
  const content: ContentBlock[] = [];
  if (r.text) content.push({ type: 'text', text: r.text });
  (r.toolCalls ?? []).forEach((call, i) =>
    content.push({ type: 'tool_use', id: call.id ?? `toolu_${n}_${i}`, name: call.name, input: call.input }),
  );
  const usage: Usage = {
    inputTokens: r.usage?.inputTokens ?? estimateRequestTokens(request.system, request.messages),
    outputTokens: r.usage?.outputTokens ?? estimateTextTokens(r.text ?? '') + 10 * (r.toolCalls?.length ?? 0),
    cacheWriteTokens: r.usage?.cacheWriteTokens ?? 0,
    cacheReadTokens: r.usage?.cacheReadTokens ?? 0,
  };
  return { content, stopReason: r.toolCalls?.length ? 'tool_use' : 'end_turn', usage };
}

/** Waits `ms` of real time, or rejects with an AbortError when `signal` fires. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return signal.aborted ? Promise.reject(abortError()) : Promise.resolve();
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError());
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(): Error {
  const e = new Error('aborted');
  e.name = 'AbortError';
  return e;
}

export function createScriptedProvider(options: ScriptedProviderOptions | ScriptedProviderOptions['reply']): ScriptedProvider {
  const opts = typeof options === 'function' ? { reply: options } : options;
  let calls = 0;
  return {
    type: opts.type ?? 'scripted',
    get calls() {
      return calls;
    },
    async call(request) {
      const n = calls++;
      const latency = typeof opts.latencyMs === 'function' ? opts.latencyMs(request) : (opts.latencyMs ?? 0);
      await sleep(latency, request.signal);
      try {
        const output = toModelOutput(request, await opts.reply(request, n), n);
        // The script answered (it did not throw a fault): the response has started.
        responseStartNotifier(request)();
        return output;
      } catch (error) {
        throw asProviderError(error, { provider: request.provider, model: request.model, keyId: request.key.id });
      }
    },
  };
}
