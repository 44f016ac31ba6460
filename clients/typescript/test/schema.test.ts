import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '../../..');

/**
 * src/schema.ts is generated from services/gateway/openapi.json by `npm run
 * generate:client` and committed. This regenerates it with the very command of that script
 * (only the output path changed) and compares: a change to the API document without a
 * regeneration fails here.
 */
it('src/schema.ts is what `npm run generate:client` writes from openapi.json', async () => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const words = pkg.scripts['generate:client']!.split(/\s+/);
  expect(words[0]).toBe('openapi-typescript');
  const args = words.slice(1);
  const out = args.indexOf('--output') + 1;
  expect(args[out]).toBe('clients/typescript/src/schema.ts');
  const dir = await mkdtemp(join(tmpdir(), 'tes-schema-'));
  try {
    args[out] = join(dir, 'schema.ts');
    await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'), ...args], { cwd: ROOT });
    const fresh = await readFile(join(dir, 'schema.ts'), 'utf8');
    const committed = await readFile(join(ROOT, 'clients/typescript/src/schema.ts'), 'utf8');
    expect(committed).toBe(fresh);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 60_000);
