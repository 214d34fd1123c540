/**
 * Quality gate by a judge model: after a task's answer passed its other checks, a scoring call
 * (through the same breaker, pool, ledger and retries as any call of the attempt) reads the
 * judge's criteria and the answer and answers with a score from 0 to 1. Pure: the request and
 * the reading of the score.
 */
import type { Message } from './protocol.js';

export const JUDGE_SYSTEM =
  'You are a strict grader. Score how well the answer meets the criteria, from 0 (not at all) to 1 (fully). ' +
  'Answer with the score alone, as a number such as 0.8, or as JSON {"score": 0.8, "reason": "..."}.';

export function judgeMessages(criteria: string, answer: string): Message[] {
  const text = `<criteria>\n${criteria}\n</criteria>\n\n<answer>\n${answer}\n</answer>\n\nYour score (0 to 1):`;
  return [{ role: 'user', content: [{ type: 'text', text }] }];
}

/**
 * The judge's score: `{"score": x}` anywhere in its answer, else the first number in it. A
 * score outside [0, 1], or none, is undefined (the gate then rejects: an unclear grade never
 * passes by accident). A reason given beside it is returned too.
 */
export function scoreOf(answer: string): { score?: number; reason?: string } {
  const json = /\{[\s\S]*\}/.exec(answer);
  if (json) {
    try {
      const value = JSON.parse(json[0]) as Record<string, unknown>;
      if (typeof value.score === 'number') {
        const out: { score?: number; reason?: string } = inRange(value.score) ? { score: value.score } : {};
        if (typeof value.reason === 'string') out.reason = value.reason;
        return out;
      }
    } catch {
      // Not JSON after all: read the first number.
    }
  }
  const number = /-?\d+(?:\.\d+)?/.exec(answer);
  const score = number ? Number(number[0]) : Number.NaN;
  return inRange(score) ? { score } : {};
}

const inRange = (x: number) => Number.isFinite(x) && x >= 0 && x <= 1;
