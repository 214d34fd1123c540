/**
 * Which adapter serves each provider of a plan, shared by the runs of one swarm (so keep-alive
 * connections and an embedded simulator outlive a single run):
 * - an adapter passed to createSwarm, by provider name or by type, wins;
 * - `anthropic` / `openai`: the real adapters over undici, at the plan's `baseURL` if any;
 * - `sim`: a simulated provider server started on 127.0.0.1 (port 0) on first use, spoken to
 *   over real HTTP with the adapter of its `protocol`. It accepts the plan's keys (and only
 *   those), with the plan's `sim.limits` or else the provider's `limits`.
 */
import type { Plan, ProviderSpec } from '../plan/index.js';
import { startSim, type SimKeyLimits, type SimServer } from '../sim/index.js';
import { createAnthropicProvider } from './anthropic.js';
import { createOpenAIProvider } from './openai.js';
import type { Provider } from './types.js';

export interface RegistryOptions {
  overrides?: Record<string, Provider>;
  /** The swarm's clock, for rate-limit resets and the simulator's buckets. */
  now: () => number;
  /** Default seed of embedded simulators. */
  seed: number;
}

export class ProviderRegistry {
  private readonly adapters = new Map<string, Provider>();

  constructor(private readonly options: RegistryOptions) {}

  /**
   * The adapter for one provider of a plan. `secrets` are that provider's keys (an embedded
   * simulator accepts exactly these).
   */
  get(name: string, spec: ProviderSpec, secrets: readonly string[]): Provider {
    const given = this.options.overrides?.[name] ?? this.options.overrides?.[spec.type];
    if (given) return given;
    const cacheKey = JSON.stringify([
      name,
      spec.type,
      spec.baseURL ?? null,
      spec.headersTimeoutMs ?? null,
      spec.bodyTimeoutMs ?? null,
      spec.cache ?? true,
      spec.type === 'sim' ? [spec.sim ?? null, spec.limits ?? null, secrets] : null,
    ]);
    let adapter = this.adapters.get(cacheKey);
    if (!adapter) {
      adapter = this.create(spec, secrets);
      this.adapters.set(cacheKey, adapter);
    }
    return adapter;
  }

  /** Adapters for every provider of a plan. */
  forPlan(plan: Plan, secretsOf: (provider: string) => string[]): Map<string, Provider> {
    return new Map(Object.entries(plan.providers).map(([name, spec]) => [name, this.get(name, spec, secretsOf(name))]));
  }

  async close(): Promise<void> {
    const all = [...this.adapters.values()];
    this.adapters.clear();
    await Promise.allSettled(all.map((a) => a.close?.()));
  }

  private create(spec: ProviderSpec, secrets: readonly string[]): Provider {
    const common = httpOptions(spec, this.options.now);
    switch (spec.type) {
      case 'anthropic':
        return createAnthropicProvider({ ...(spec.baseURL ? { baseURL: spec.baseURL } : {}), ...common, cache: spec.cache ?? true });
      case 'openai':
        return createOpenAIProvider({ ...(spec.baseURL ? { baseURL: spec.baseURL } : {}), ...common });
      case 'sim':
        return spec.baseURL ? this.remoteSim(spec) : embeddedSim(spec, secrets, this.options);
    }
  }

  /** A `sim` provider with a baseURL: a simulator already running elsewhere (`swarmstate sim`). */
  private remoteSim(spec: ProviderSpec): Provider {
    return simAdapter(spec, spec.baseURL!.replace(/\/+$/, ''), this.options.now);
  }
}

function httpOptions(spec: ProviderSpec, now: () => number) {
  return {
    now,
    ...(spec.headersTimeoutMs !== undefined ? { headersTimeoutMs: spec.headersTimeoutMs } : {}),
    ...(spec.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: spec.bodyTimeoutMs } : {}),
  };
}

/** The adapter of a simulator's protocol, at its base URL. */
function simAdapter(spec: ProviderSpec, baseURL: string, now: () => number): Provider {
  const common = httpOptions(spec, now);
  const adapter =
    spec.sim?.protocol === 'openai'
      ? createOpenAIProvider({ baseURL: `${baseURL}/v1`, ...common })
      : createAnthropicProvider({ baseURL, ...common, cache: spec.cache ?? true });
  return { type: 'sim', call: (request) => adapter.call(request), close: () => adapter.close?.() ?? Promise.resolve() };
}

/** A provider backed by a simulator this process starts on first use and stops on close. */
function embeddedSim(spec: ProviderSpec, secrets: readonly string[], options: RegistryOptions): Provider {
  const sim = spec.sim;
  const limits: SimKeyLimits = {};
  const source = sim?.limits ?? spec.limits ?? {};
  if (source.rpm !== undefined) limits.rpm = source.rpm;
  if (source.itpm !== undefined) limits.itpm = source.itpm;
  if (source.otpm !== undefined) limits.otpm = source.otpm;
  if (source.burst !== undefined) limits.burst = source.burst;
  let started: Promise<{ server: SimServer; adapter: Provider }> | undefined;
  const start = () =>
    (started ??= startSim({
      seed: sim?.seed ?? options.seed,
      keys: secrets.length > 0 ? Object.fromEntries(secrets.map((s) => [s, limits])) : 'any',
      latency: {
        ...(sim?.ttftMs !== undefined ? { ttftMs: sim.ttftMs } : {}),
        ...(sim?.tokensPerSecond !== undefined ? { tokensPerSecond: sim.tokensPerSecond } : {}),
        ...(sim?.prefillMsPer1kTokens !== undefined ? { prefillMsPer1kTokens: sim.prefillMsPer1kTokens } : {}),
      },
      ...(sim?.faults ? { faults: sim.faults } : {}),
      ...(sim?.stallMs !== undefined ? { stallMs: sim.stallMs } : {}),
      now: options.now,
    }).then(
      (server) => ({ server, adapter: simAdapter(spec, server.url, options.now) }),
      (error: unknown) => {
        started = undefined; // a failed start is tried again by the next call
        throw error;
      },
    ));
  return {
    type: 'sim',
    async call(request) {
      const { adapter } = await start();
      return adapter.call(request);
    },
    async close() {
      if (!started) return;
      const { server, adapter } = await started;
      await adapter.close?.();
      await server.close();
    },
  };
}
