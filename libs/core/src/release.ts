import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * This build's release, e.g. `0.2.0`: the version lerna keeps the same in every package of the
 * repository (lerna.json, fixed mode; CHANGELOG.md says what each one changed), read from this
 * package's package.json, which every image carries. Shown in each process's /healthz, in
 * tes_build_info and in its traces (service.version).
 */
export const RELEASE: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();
