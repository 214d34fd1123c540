/**
 * The one reading of a numeric command-line flag, for every command (`--seed`, `--budget-usd`,
 * `--concurrency`, `swarmstate sim --port`...): decimal text only. `Number()` alone would take
 * `0x10` as 16, `0b1` as 1, `" 7"` as 7 and `Infinity` as a number.
 */

/** What a numeric flag accepts. */
export interface NumberRule {
  /** The rule in words, for the error: `--<flag> must be <says>, got "<text>"`. */
  says: string;
  /** A (safe) integer only. */
  integer?: boolean;
  /** The smallest value allowed. */
  min?: number;
  /** Values must be greater than this. */
  above?: number;
  /** The largest value allowed. */
  max?: number;
}

const DECIMAL = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * A flag's text as a number by its rule, or the problem in one sentence.
 *
 * @example
 * numberFlag('budget-usd', '0x10', { says: 'a number greater than 0', above: 0 })
 * // { problem: '--budget-usd must be a number greater than 0, got "0x10"' }
 */
export function numberFlag(flag: string, text: string, rule: NumberRule): { value: number } | { problem: string } {
  const value = Number(text);
  const ok =
    DECIMAL.test(text) &&
    Number.isFinite(value) &&
    (rule.integer !== true || Number.isSafeInteger(value)) &&
    (rule.min === undefined || value >= rule.min) &&
    (rule.above === undefined || value > rule.above) &&
    (rule.max === undefined || value <= rule.max);
  return ok ? { value } : { problem: `--${flag} must be ${rule.says}, got "${text}"` };
}
