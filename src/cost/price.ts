/**
 * From token usage to dollars, for results and reports. Callers pass the price `priceOf` picked
 * (the plan's, else the built-in table's). A model without any price has an unknown cost (null),
 * never a made-up zero.
 */
import { costOfUsage } from '../../machines/cost.js';
import type { Usage } from '../../machines/protocol.js';
import type { ModelPrice } from '../plan/index.js';

export function costOf(usage: Usage, price: ModelPrice | undefined): number | null {
  return price ? costOfUsage(usage, price) : null;
}
