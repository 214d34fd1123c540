/**
 * A provider for integration tests that sends every request to a simulator over real HTTP (the
 * Anthropic adapter) and keeps it, so a test can see what reached the model. A `script` may
 * answer a request itself, before or after asking the simulator (a model that misbehaves on
 * purpose, or one that needs more tool rounds than the simulator's directives can drive).
 *
 * @example
 * const { provider, requests } = recordingProvider(sim.url);
 * const swarm = createSwarm({ providers: { main: provider } });
 */
import type { ContentBlock, ModelCallOutput, RunEvent } from '../../machines/protocol.js';
import { createAnthropicProvider } from '../../src/providers/anthropic.js';
import type { Provider, ProviderRequest } from '../../src/providers/types.js';
import type { RunHandle } from '../../src/swarm.js';

export type ToolResultBlock = Extract<ContentBlock, { type: 'tool_result' }>;

/** Answers a request, or returns undefined to let the simulator answer it. */
export type Script = (request: ProviderRequest, sim: Provider) => Promise<ModelCallOutput> | undefined;

export function recordingProvider(baseURL: string, script?: Script): { provider: Provider; requests: ProviderRequest[] } {
  const sim = createAnthropicProvider({ baseURL });
  const requests: ProviderRequest[] = [];
  const provider: Provider = {
    type: 'sim',
    call(request) {
      requests.push(request);
      return script?.(request, sim) ?? sim.call(request);
    },
    close: () => sim.close?.() ?? Promise.resolve(),
  };
  return { provider, requests };
}

/** The tool results a task's requests carried, in order. */
export function toolResultsOf(requests: readonly ProviderRequest[], taskId: string): ToolResultBlock[] {
  return requests
    .filter((r) => r.meta.taskId === taskId)
    .flatMap((r) => r.messages.at(-1)!.content)
    .filter((b): b is ToolResultBlock => b.type === 'tool_result');
}

/** Every event of a run, in order (subscribe right after `swarm.run()`). */
export function recordEvents(run: RunHandle): RunEvent[] {
  const out: RunEvent[] = [];
  run.events.on('*', (_type, event) => out.push(event as RunEvent));
  return out;
}

/** The events of one type. */
export const ofType = <T extends RunEvent['type']>(events: readonly RunEvent[], type: T) =>
  events.filter((e): e is Extract<RunEvent, { type: T }> => e.type === type);
