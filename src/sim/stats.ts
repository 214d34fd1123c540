/**
 * The simulator's counters and request log (`GET /stats`, `SimServer.stats()`). Keys appear only
 * as fingerprints.
 */
import type { SimKeyStats, SimLogEntry, SimModelStats, SimStats, SimUsage } from './types.js';

/** How many requests the log keeps (the newest). */
export const LOG_LIMIT = 100_000;

export interface Outcome {
  entry: SimLogEntry;
  usage?: SimUsage;
}

export class StatsRecorder {
  private stats: Omit<SimStats, 'log' | 'inFlight' | 'peakInFlight'> = StatsRecorder.empty();
  private log: SimLogEntry[] = [];
  /** Requests arrived and not yet recorded: not cleared by reset, which only restarts the peak. */
  private inFlight = 0;
  private peakInFlight = 0;

  private static empty(): Omit<SimStats, 'log' | 'inFlight' | 'peakInFlight'> {
    return { requests: 0, ok: 0, faults: 0, byStatus: {}, byKey: {}, byModel: {}, cache: { readRequests: 0, writeRequests: 0, readTokens: 0, writeTokens: 0 } };
  }

  /** A model request has arrived; `record` ends it. */
  arrived(): void {
    this.inFlight++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
  }

  /** Counts one finished request. `ok`: a complete 2xx answer without an injected fault. */
  record({ entry, usage }: Outcome, cacheWriteTokens = usage?.cacheWriteTokens ?? 0): void {
    const s = this.stats;
    this.inFlight--;
    const ok = entry.status >= 200 && entry.status < 300 && entry.fault === undefined && !entry.aborted;
    s.requests++;
    if (ok) s.ok++;
    if (entry.fault !== undefined) s.faults++;
    s.byStatus[entry.status] = (s.byStatus[entry.status] ?? 0) + 1;

    const key = (s.byKey[entry.key] ??= { requests: 0, ok: 0, rateLimited: 0, unauthorized: 0, faults: 0 } satisfies SimKeyStats);
    key.requests++;
    if (ok) key.ok++;
    if (entry.status === 429) key.rateLimited++;
    if (entry.status === 401) key.unauthorized++;
    if (entry.fault !== undefined) key.faults++;

    const model = (s.byModel[entry.model] ??= { requests: 0, ok: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } satisfies SimModelStats);
    model.requests++;
    if (ok) model.ok++;
    if (usage) {
      model.inputTokens += usage.inputTokens;
      model.outputTokens += usage.outputTokens;
      model.cacheReadTokens += usage.cacheReadTokens;
      model.cacheWriteTokens += cacheWriteTokens;
      if (usage.cacheReadTokens > 0) {
        s.cache.readRequests++;
        s.cache.readTokens += usage.cacheReadTokens;
      }
      if (cacheWriteTokens > 0) {
        s.cache.writeRequests++;
        s.cache.writeTokens += cacheWriteTokens;
      }
    }

    this.log.push(entry);
    // Trim in batches so the log stays O(1) amortized per request.
    if (this.log.length > LOG_LIMIT + LOG_LIMIT / 10) this.log.splice(0, this.log.length - LOG_LIMIT);
  }

  snapshot(): SimStats {
    return structuredClone({ ...this.stats, inFlight: this.inFlight, peakInFlight: this.peakInFlight, log: this.log.slice(-LOG_LIMIT) });
  }

  reset(): void {
    this.stats = StatsRecorder.empty();
    this.log = [];
    this.peakInFlight = this.inFlight;
  }
}
