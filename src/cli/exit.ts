/** The exit codes of the `swarmstate` command (docs/cli.md#exit-codes). */
export const EXIT = { ok: 0, incomplete: 1, invalid: 2, locked: 3, journal: 4 } as const;
