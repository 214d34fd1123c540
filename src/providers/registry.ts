/**
 * Which adapter serves each provider of a plan, shared by the runs of one swarm (so keep-alive
 * connections and an embedded simulator outlive a single run). The types are listed once, in
 * providerTypes.ts; `ADAPTERS` below has the factory of each built-in one:
 * - an adapter passed to createSwarm, by provider name or by type, wins;
 * - `custom`: only such an adapter (any object with `call(request)`);
 * - `ai-sdk`: an AI SDK model (or provider) passed there, wrapped by createAiSdkProvider;
 * - `anthropic` / `openai`: the real adapters over undici, at the plan's `baseURL` if any;
 * - `sim`: a simulated provider server started on 127.0.0.1 (port 0) on first use, spoken to
 *   over real HTTP with the adapter of its `protocol`. It accepts the plan's keys (and only
 *   those), with the plan's `sim.limits` or else the provider's `limits`.
 */
import { PlanValidationError, type Plan, type ProviderSpec } from '../plan/index.js';
import type { SimKeyLimits, SimServer } from '../sim/index.js';
import { createAiSdkProvider, isAiSdkModelSource, type AiSdkModelSource } from './aisdk.js';
import { createAnthropicProvider } from './anthropic.js';
import { createOpenAIProvider } from './openai.js';
import { PROVIDER_TYPES, type BuiltInProviderType } from './providerTypes.js';
import type { Provider } from './types.js';

/** What createSwarm takes per provider: one of our adapters, or an AI SDK model for `ai-sdk`. */
export type ProviderObject = Provider | AiSdkModelSource;

export interface RegistryOptions {
  overrides?: Record<string, ProviderObject>;
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
    if (given !== undefined || PROVIDER_TYPES[spec.type].inCode) return this.given(name, spec, given);
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

  /** The object createSwarm was given for a provider, checked against the plan's type. */
  private given(name: string, spec: ProviderSpec, given: ProviderObject | undefined): Provider {
    const path = `providers.${name}.type`;
    if (given === undefined) {
      const what = spec.type === 'custom' ? 'an object with call(request)' : 'an AI SDK language model or provider';
      throw new PlanValidationError([{ path, message: `a "${spec.type}" provider is an object given in code: pass ${what} as createSwarm({ providers: { ${JSON.stringify(name)}: ... } })` }]);
    }
    if (isProvider(given)) return given;
    if (spec.type === 'ai-sdk' && isAiSdkModelSource(given)) {
      let adapter = this.adapters.get(`ai-sdk:${name}`);
      if (!adapter) {
        adapter = createAiSdkProvider(given, { now: this.options.now, cache: spec.cache ?? true });
        this.adapters.set(`ai-sdk:${name}`, adapter);
      }
      return adapter;
    }
    const hint = isAiSdkModelSource(given) ? ': this looks like an AI SDK model, declare the provider "type": "ai-sdk"' : '';
    throw new PlanValidationError([{ path, message: `the object given to createSwarm for provider "${name}" has no call(request) method${hint}` }]);
  }

  private create(spec: ProviderSpec, secrets: readonly string[]): Provider {
    // In-code types never get here (given() serves them).
    const factory = ADAPTERS[spec.type as BuiltInProviderType] as AdapterFactory | undefined;
    if (!factory) throw new Error(`no built-in adapter for provider type "${spec.type}"`);
    return factory(spec, secrets, this.options);
  }

}

type AdapterFactory = (spec: ProviderSpec, secrets: readonly string[], options: RegistryOptions) => Provider;

/** The adapter of each built-in provider type (src/providers/providerTypes.ts lists the types). */
const ADAPTERS: Record<BuiltInProviderType, AdapterFactory> = {
  anthropic: (spec, _secrets, options) => createAnthropicProvider({ ...(spec.baseURL ? { baseURL: spec.baseURL } : {}), ...httpOptions(spec, options.now), cache: spec.cache ?? true }),
  openai: (spec, _secrets, options) => createOpenAIProvider({ ...(spec.baseURL ? { baseURL: spec.baseURL } : {}), ...httpOptions(spec, options.now) }),
  // With a baseURL: a simulator already running elsewhere (`swarmstate sim`).
  sim: (spec, secrets, options) => (spec.baseURL ? simAdapter(spec, spec.baseURL.replace(/\/+$/, ''), options.now) : embeddedSim(spec, secrets, options)),
};

function isProvider(value: unknown): value is Provider {
  // Every function has Function.prototype.call: an AI SDK provider (a function) is not one of ours.
  const call = (value as { call?: unknown } | null)?.call;
  return value !== null && typeof value === 'object' && typeof call === 'function';
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
  // The simulator's code (and js-tiktoken with it) loads when the first call starts it.
  const start = () =>
    (started ??= import('../sim/server.js').then(({ startSim }) => startSim({
      seed: sim?.seed ?? options.seed,
      keys: secrets.length > 0 ? Object.fromEntries(secrets.map((s) => [s, limits])) : 'any',
      latency: {
        ...(sim?.ttftMs !== undefined ? { ttftMs: sim.ttftMs } : {}),
        ...(sim?.tokensPerSecond !== undefined ? { tokensPerSecond: sim.tokensPerSecond } : {}),
        ...(sim?.prefillMsPer1kTokens !== undefined ? { prefillMsPer1kTokens: sim.prefillMsPer1kTokens } : {}),
      },
      ...(sim?.faults ? { faults: sim.faults } : {}),
      ...(sim?.stallMs !== undefined ? { stallMs: sim.stallMs } : {}),
      ...(sim?.headers !== undefined ? { headers: sim.headers } : {}),
      now: options.now,
    })).then(
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
