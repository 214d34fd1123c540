/**
 * Review loops: a review task reads the output of the task it reviews and answers with a verdict.
 * `APPROVE` ends the loop; `REVISE: <findings>` sends the reviewed task back for one more round
 * with the findings, until `maxRounds` reviews have been made (then the last draft stands, marked
 * unapproved). The runtime, not the model, counts the rounds.
 *
 * Verdicts are read leniently, because models decorate: the first non-empty line decides
 * (`APPROVE`, `APPROVED`, `LGTM`; `REVISE`, `CHANGES`), else a JSON object
 * `{"verdict": "approve" | "revise", "findings": "..."}` or `{"approved": bool, ...}`. An answer
 * that says neither counts as findings: an unclear review never approves by accident.
 */

export interface Verdict {
  verdict: 'approve' | 'revise';
  findings?: string;
}

const APPROVE = /^\W*(approve|approved|lgtm)\b\W*/i;
const REVISE = /^\W*(revise|revisions?|changes(\s+requested)?|request\s+changes)\b\W*/i;

export function verdictOf(output: string): Verdict {
  const text = output.trim();
  const firstLine = text.split('\n', 1)[0] ?? '';
  if (APPROVE.test(firstLine)) return { verdict: 'approve' };
  if (REVISE.test(firstLine)) {
    const findings = text.replace(REVISE, '').trim();
    return findings ? { verdict: 'revise', findings } : { verdict: 'revise', findings: text };
  }
  const json = jsonObjectIn(text);
  if (json) {
    const findings = typeof json.findings === 'string' ? json.findings : Array.isArray(json.findings) ? json.findings.map(String).join('\n') : undefined;
    const approved = json.approved === true || (typeof json.verdict === 'string' && /^approve/i.test(json.verdict));
    const revise = json.approved === false || (typeof json.verdict === 'string' && /^(revise|changes)/i.test(json.verdict));
    if (approved) return { verdict: 'approve' };
    if (revise) return { verdict: 'revise', findings: findings ?? text };
  }
  return { verdict: 'revise', findings: text };
}

function jsonObjectIn(text: string): Record<string, unknown> | undefined {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end <= start) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(start, end + 1));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The prompt of a reviewed task's next round: its own prompt, its last draft and the findings. */
export function revisionPrompt(prompt: string, feedback: { round: number; maxRounds: number; draft: string; findings: string }): string {
  return (
    `${prompt}\n\n<revision round="${feedback.round + 1}" of="${feedback.maxRounds}">\n` +
    `A reviewer read your previous answer and asked for changes. Answer the task again in full, addressing every finding.\n\n` +
    `<previous-answer>\n${feedback.draft}\n</previous-answer>\n\n<findings>\n${feedback.findings}\n</findings>\n</revision>`
  );
}
