/** The exit codes of the `swarmstate` command (docs/cli.md#exit-codes). `paused`: the run waits for approvals (`swarmstate approve`, then `resume`). */
export const EXIT = { ok: 0, incomplete: 1, invalid: 2, locked: 3, journal: 4, paused: 5 } as const;
