/**
 * The in-process simulated provider: what `type: "sim"` runs on when no server is given.
 * Deterministic: the same request and seed give the same reply. No network, no key.
 */
import type { Message } from '../../machines/protocol.js';
import { textOf } from '../../machines/tokens.js';
import { createScriptedProvider, type ScriptedProvider } from './scripted.js';

export interface InProcessSimOptions {
  seed?: number;
  /** Latency per call in ms: a fixed number, or [min, max] picked per request deterministically. */
  latencyMs?: number | [number, number];
}

/** FNV-1a over a string: a stable 32-bit hash. */
export function hash32(text: string, seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function lastUserText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'user') return textOf(m.content);
  }
  return '';
}

const WORDS = ['alpha', 'delta', 'sigma', 'omega', 'kappa', 'lambda', 'theta', 'gamma', 'zeta', 'rho', 'tau', 'phi'];

export function createInProcessSim(options: InProcessSimOptions = {}): ScriptedProvider {
  const seed = options.seed ?? 0;
  const latency = options.latencyMs ?? 0;
  return createScriptedProvider({
    type: 'sim',
    latencyMs: (req) => {
      if (typeof latency === 'number') return latency;
      const [min, max] = latency;
      return min + (hash32(req.meta.taskId + ':' + req.meta.turn, seed) % (max - min + 1));
    },
    reply: (req) => {
      const prompt = lastUserText(req.messages);
      const h = hash32(`${req.model}\u0000${req.system ?? ''}\u0000${prompt}`, seed);
      const words = Array.from({ length: 6 }, (_, i) => WORDS[(h >>> (i * 4)) % WORDS.length]);
      const gist = prompt.replace(/\s+/g, ' ').slice(0, 60);
      return `[${req.model}] ${words.join(' ')} :: ${gist}`;
    },
  });
}
