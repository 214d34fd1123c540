/**
 * Every provider `type` a plan may name, in one table: what the plan checks for it and what the
 * run derives from it. Data only (the plan's schema reads it, so it loads no adapter).
 *
 * Adding a type: a row here, its adapter in its own file beside anthropic.ts, and its factory in
 * `ADAPTERS` (src/providers/registry.ts), which the compiler asks for (one per built-in type).
 */

/** The wire protocol a provider's calls use, where the runtime must know it. */
export type WireProtocol = 'anthropic' | 'openai';

export interface ProviderTypeInfo {
  /** One line for the docs (docs/plan-format.md lists the same). */
  readonly doc: string;
  /** The plan must list at least one key for it. */
  readonly needsKeys: boolean;
  /**
   * Served by an object given in code (`createSwarm({ providers })`), not by an adapter of ours:
   * the plan sets no endpoint or timeouts for it, and it cannot run on a distributed worker.
   */
  readonly inCode: boolean;
  /** The protocol its calls speak (cache-aware fan-out is on by default for anthropic). */
  readonly protocol: (spec: { sim?: { protocol?: WireProtocol } }) => WireProtocol | undefined;
}

export const PROVIDER_TYPES = {
  anthropic: { doc: 'the Anthropic Messages API, at `baseURL` or api.anthropic.com', needsKeys: true, inCode: false, protocol: () => 'anthropic' },
  openai: { doc: 'the OpenAI Chat Completions API (or a compatible server at `baseURL`)', needsKeys: true, inCode: false, protocol: () => 'openai' },
  sim: { doc: 'the simulated provider: embedded, or a `swarmstate sim` at `baseURL`', needsKeys: false, inCode: false, protocol: (spec) => spec.sim?.protocol ?? 'anthropic' },
  custom: { doc: 'an object with `call(request)` given in code', needsKeys: false, inCode: true, protocol: () => undefined },
  'ai-sdk': { doc: 'an AI SDK language model (or provider) given in code', needsKeys: false, inCode: true, protocol: () => undefined },
} as const satisfies Record<string, ProviderTypeInfo>;

/**
 * `custom`: an object with `call(request)` given to createSwarm under the provider's name;
 * `ai-sdk`: an AI SDK language model (or provider) given there. `sim` given an object works as
 * `custom` did before it existed.
 */
export type ProviderType = keyof typeof PROVIDER_TYPES;

/** The types served by an adapter of ours (the others by an object given in code). */
export type BuiltInProviderType = { [T in ProviderType]: (typeof PROVIDER_TYPES)[T]['inCode'] extends true ? never : T }[ProviderType];

export const PROVIDER_TYPE_NAMES = Object.keys(PROVIDER_TYPES) as [ProviderType, ...ProviderType[]];

/** The row of `type`; undefined for a name that is not a provider type (unparsed input). */
export function providerTypeOf(type: unknown): ProviderTypeInfo | undefined {
  return typeof type === 'string' && Object.hasOwn(PROVIDER_TYPES, type) ? PROVIDER_TYPES[type as ProviderType] : undefined;
}
