/**
 * Optional packages (bullmq and ioredis for distributed runs, @statelyai/inspect for --inspect):
 * installed by whoever needs the feature, loaded only when it is used, so `import 'swarmstate'`
 * and a plain run load none of them. Without the package, the feature fails with an error that
 * says what to install, not with Node's bare "Cannot find package".
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The feature needs packages that are not installed. */
export class MissingPackageError extends Error {
  readonly code = 'OPTIONAL_PACKAGE_MISSING';
  constructor(
    readonly packages: readonly string[],
    readonly feature: string,
  ) {
    const list = packages.join(' and ');
    super(`${feature} needs the optional package${packages.length > 1 ? 's' : ''} ${list}, not installed here: npm install ${packages.join(' ')}`);
    this.name = 'MissingPackageError';
  }
}

/** True when `error` is Node failing to find one of `packages` (import or require). */
export function isMissingPackage(error: unknown, packages: readonly string[]): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' && e?.code !== 'MODULE_NOT_FOUND') return false;
  const message = typeof e.message === 'string' ? e.message : '';
  return packages.some((name) => message.includes(`'${name}'`) || message.includes(`"${name}"`) || message.includes(`/node_modules/${name}/`));
}

/**
 * Runs `load` (a dynamic import of the module that needs `packages`); a missing package becomes
 * a MissingPackageError naming `feature` and what to install. Other failures pass through.
 */
export async function importOptional<T>(load: () => Promise<T>, packages: readonly string[], feature: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (isMissingPackage(error, packages)) throw new MissingPackageError(packages, feature);
    throw error;
  }
}

/**
 * Throws a MissingPackageError now when one of `packages` cannot be found, for a caller that must
 * fail at once (createSwarm) rather than when the feature is first used. Loads nothing.
 */
export function assertInstalled(packages: readonly string[], feature: string): void {
  const missing = packages.filter((name) => {
    try {
      require.resolve(name);
      return false;
    } catch (error) {
      return isMissingPackage(error, [name]);
    }
  });
  if (missing.length > 0) throw new MissingPackageError(missing, feature);
}
