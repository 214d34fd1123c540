/**
 * The simulated LLM provider server: Anthropic Messages and OpenAI Chat Completions on
 * 127.0.0.1, with latency, per-key rate limits, faults and prompt caching (docs/sim.md).
 *
 * @example
 * import { startSim } from './sim/index.js';
 * const sim = await startSim({ seed: 7, keys: { 'sk-a': { rpm: 50 } }, faults: { http529: 0.05 } });
 * // Anthropic SDK: baseURL sim.url; OpenAI SDK: baseURL `${sim.url}/v1`
 * await sim.close();
 */
export { startSim } from './server.js';
export { simCommand, SIM_HELP, SIM_OPTIONS } from './cli.js';
export type {
  SimFaultKind,
  SimFaults,
  SimKeyLimits,
  SimKeyStats,
  SimLogEntry,
  SimModelStats,
  SimOptions,
  SimProtocol,
  SimServer,
  SimStats,
} from './types.js';
