/** Raw HTTP helpers for the simulator tests (the SDK tests use the SDKs instead). */
import { afterEach } from 'vitest';
import { startSim, type SimOptions, type SimServer } from '../../src/sim/index.js';

/** Starts simulators for a test file's tests; each is closed after its test. */
export function useSims(): (options?: SimOptions) => Promise<SimServer> {
  const open: SimServer[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  return async (options = {}) => {
    const server = await startSim(options);
    open.push(server);
    return server;
  };
}

export const messagesUrl = (s: SimServer) => `${s.url}/v1/messages`;
export const chatUrl = (s: SimServer) => `${s.url}/v1/chat/completions`;

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** POSTs `body` (an object, or a raw string) and reads the whole answer. */
export async function post(url: string, body: unknown, options: { key?: string; bearer?: string; signal?: AbortSignal } = {}): Promise<RawResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.key !== undefined) headers['x-api-key'] = options.key;
  if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
  const init: RequestInit = { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) };
  if (options.signal) init.signal = options.signal;
  const res = await fetch(url, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** The events of an SSE body: `event:` name (if any) and parsed `data:` (raw string if not JSON). */
export function sseEvents(text: string): { event?: string; data: any }[] {
  const out: { event?: string; data: any }[] = [];
  for (const frame of text.split('\n\n')) {
    if (frame.trim() === '') continue;
    let event: string | undefined;
    let data = '';
    for (const line of frame.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    let parsed: unknown = data;
    try {
      parsed = JSON.parse(data);
    } catch {
      // '[DONE]' stays a string
    }
    out.push(event === undefined ? { data: parsed } : { event, data: parsed });
  }
  return out;
}

/** A minimal Anthropic Messages body. */
export function messagesBody(prompt: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'claude-sim', max_tokens: 256, messages: [{ role: 'user', content: prompt }], ...extra };
}

/** A minimal OpenAI Chat Completions body. */
export function chatBody(prompt: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-sim', messages: [{ role: 'user', content: prompt }], ...extra };
}

/** A controllable clock for `startSim({ now })`. */
export function manualClock(start = 1_750_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}
