import { execFile } from 'node:child_process';
import { DevError } from './output';

export interface DevSeed {
  organizationId: string;
  projectId: string;
  keyId: string;
  secret: string;
  availableMicros: number;
}

/**
 * Creates a development organization, project ($100) and all-scopes key through the admin
 * CLI (`dev seed`), the same command a developer can run by hand. A new project and key
 * every start: key secrets are stored only as digests, so an old one cannot be printed again.
 */
export function devSeed(env: Record<string, string>): Promise<DevSeed> {
  const cli = require.resolve('@tes/admin');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, 'dev', 'seed'], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) {
        reject(new DevError(`admin dev seed failed: ${stderr.trim() || err.message}`));
        return;
      }
      try {
        const seed = JSON.parse(stdout) as DevSeed;
        if (typeof seed.secret !== 'string') throw new Error('no secret in the output');
        resolve(seed);
      } catch (e) {
        // what it printed may hold the key's secret: never echo that
        const shown = stdout.replace(/tes_[0-9A-Za-z]{8}_[0-9A-Za-z]{32}/g, 'tes_(secret withheld)').slice(0, 200);
        reject(new DevError(`admin dev seed printed something unexpected (${(e as Error).message}): ${shown}`));
      }
    });
  });
}
