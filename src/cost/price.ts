/**
 * From token usage to dollars, for results and reports: the plan's price for the model, else the
 * built-in table's (src/cost/prices.ts, once present). A model without any price has an unknown
 * cost (null), never a made-up zero.
 */
import { costOfUsage } from '../../machines/cost.js';
import type { Usage } from '../../machines/protocol.js';
import type { ModelPrice } from '../plan/index.js';

export function costOf(usage: Usage, price: ModelPrice | undefined): number | null {
  return price ? costOfUsage(usage, price) : null;
}
