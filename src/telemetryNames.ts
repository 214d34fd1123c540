/**
 * What the OpenTelemetry GenAI semantic conventions (v1.41.0, docs/tracing.md) name, as
 * swarmstate fills it: the provider's name, the server a provider's calls go to, finish reasons,
 * the `OTEL_SEMCONV_STABILITY_OPT_IN` switch, and the content of a call as the conventions' JSON
 * (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`).
 */
import type { ContentBlock, Message, StopReason } from '../machines/protocol.js';

/** The version of the GenAI conventions whose names the spans and metrics use. */
export const GEN_AI_SEMCONV_VERSION = '1.41.0';

/**
 * `OTEL_SEMCONV_STABILITY_OPT_IN` holds `gen_ai_latest_experimental`: emit the latest conventions
 * only, not the names of v1.36.0 and before that swarmstate also sends by default (`gen_ai.system`).
 */
export function latestGenAiOnly(env: Record<string, string | undefined> = process.env): boolean {
  const value = env.OTEL_SEMCONV_STABILITY_OPT_IN;
  return value !== undefined && value.split(',').some((v) => v.trim() === 'gen_ai_latest_experimental');
}

/** Well-known `gen_ai.provider.name` values, by the first part of an AI SDK model's `provider` (`anthropic.messages`). */
const AI_SDK_PROVIDERS: Record<string, string> = {
  anthropic: 'anthropic',
  openai: 'openai',
  'azure-openai': 'azure.ai.openai',
  azure: 'azure.ai.openai',
  google: 'gcp.gemini',
  'google-vertex': 'gcp.vertex_ai',
  vertex: 'gcp.vertex_ai',
  'amazon-bedrock': 'aws.bedrock',
  bedrock: 'aws.bedrock',
  mistral: 'mistral_ai',
  cohere: 'cohere',
  groq: 'groq',
  deepseek: 'deepseek',
  perplexity: 'perplexity',
  xai: 'x_ai',
};

/**
 * The `gen_ai.provider.name` of an AI SDK model's `provider` field: `anthropic.messages` ->
 * `anthropic`, `openai.chat` -> `openai`, `google.generative-ai` -> `gcp.gemini`,
 * `google.vertex.chat` -> `gcp.vertex_ai`; a provider the conventions do not list keeps its
 * own first part (`ollama.chat` -> `ollama`).
 */
export function aiSdkProviderName(provider: string): string {
  const lower = provider.toLowerCase();
  const [first = lower, second] = lower.split('.');
  if (first === 'google' && second === 'vertex') return 'gcp.vertex_ai';
  return AI_SDK_PROVIDERS[first] ?? (first || 'swarmstate.ai-sdk');
}

/**
 * The provider name of a model given in code for an `ai-sdk` provider, read from the object
 * itself where that costs nothing (a model: its `provider`; an AI SDK provider: the model
 * `languageModel(modelId)` makes). A function of the key says nothing before a call: the
 * reply's `response.provider` tells then.
 */
export function aiSdkSourceProvider(source: unknown, modelId: string): string | undefined {
  try {
    if (!source || typeof source !== 'object') return undefined;
    const s = source as { provider?: unknown; doGenerate?: unknown; languageModel?: (id: string) => { provider?: unknown } };
    if (typeof s.doGenerate === 'function') return typeof s.provider === 'string' ? s.provider : undefined;
    if (typeof s.languageModel === 'function') {
      const provider = s.languageModel(modelId)?.provider;
      return typeof provider === 'string' ? provider : undefined;
    }
  } catch {
    // A provider that cannot make the model here fails its call, not its span.
  }
  return undefined;
}

/** Where a provider's calls go (`server.address`, `server.port`): its base URL, or the API's own. */
export function serverOf(type: string, baseURL: string | undefined): { address: string; port: number } | undefined {
  const url = baseURL ?? (type === 'anthropic' ? 'https://api.anthropic.com' : type === 'openai' ? 'https://api.openai.com/v1' : undefined);
  if (url === undefined) return undefined;
  try {
    const u = new URL(url);
    const port = u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : u.protocol === 'http:' ? 80 : undefined;
    const address = u.hostname.replace(/^\[(.*)\]$/, '$1');
    return port === undefined || address === '' ? undefined : { address, port };
  } catch {
    return undefined;
  }
}

/** A reply's stop reason as the conventions' finish reason (`stop`, `length`, `tool_call`, `content_filter`). */
export function finishReason(stop: StopReason): string {
  switch (stop) {
    case 'end_turn':
    case 'stop_sequence':
      return 'stop';
    case 'max_tokens':
      return 'length';
    case 'tool_use':
      return 'tool_call';
    case 'refusal':
      return 'content_filter';
    default:
      return stop;
  }
}

type Part =
  | { type: 'text'; content: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_call_response'; id: string; response: string };

function partsOf(blocks: readonly ContentBlock[]): Part[] {
  return blocks.map((b): Part => {
    if (b.type === 'text') return { type: 'text', content: b.text };
    if (b.type === 'tool_use') return { type: 'tool_call', id: b.id, name: b.name, arguments: b.input };
    return { type: 'tool_call_response', id: b.toolUseId, response: b.content };
  });
}

/** `gen_ai.input.messages`: the conversation as sent (tool results as `tool` messages, as the conventions show them). */
export function inputMessages(messages: readonly Message[]): unknown[] {
  return messages.map((m) => {
    const toolResults = m.role === 'user' && m.content.length > 0 && m.content.every((b) => b.type === 'tool_result');
    return { role: toolResults ? 'tool' : m.role, parts: partsOf(m.content) };
  });
}

/** `gen_ai.output.messages`: the one choice a reply is, with its finish reason. */
export function outputMessages(content: readonly ContentBlock[], stop: StopReason): unknown[] {
  return [{ role: 'assistant', parts: partsOf(content), finish_reason: finishReason(stop) }];
}

/** `gen_ai.system_instructions`: the system prompt, sent apart from the conversation. */
export function systemInstructions(system: string): unknown[] {
  return [{ type: 'text', content: system }];
}
