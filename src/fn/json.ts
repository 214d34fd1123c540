/** Placeholder until the plan-side module lands: whether a value is JSON (see FnContext). */
export function jsonProblem(value: unknown): string | undefined {
  try {
    return JSON.stringify(value) === undefined ? '$ is undefined (return null or a value)' : undefined;
  } catch (error) {
    return `$ is not JSON: ${(error as Error).message}`;
  }
}
