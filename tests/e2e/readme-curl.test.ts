import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useStack } from '../stack';

/**
 * The README's "Five minutes with curl" runs as written against a real stack: the shell block is
 * taken from the README, only its two exported values (the address and the key) replaced, and it
 * must leave the rendered PNG behind. The quote's priceVersion and maximum reach the submit
 * through the shell, never a value written into the README.
 */
const stack = useStack();
const README = readFileSync(path.join(__dirname, '../../README.md'), 'utf8');

/** Runs bash asynchronously: the stack serves from this process, so a synchronous child would stall it. */
function bash(script: string, cwd: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { cwd, encoding: 'utf8', timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

function curlWalk(): string {
  const section = README.slice(README.indexOf('## Five minutes with curl'));
  return /```sh\n([\s\S]*?)```/.exec(section)![1]!;
}

test('the curl walk renders hello.png, with the price version taken from the quote', async () => {
  const { secret } = await stack.seed({ creditMicros: 1_000_000 });
  const walk = curlWalk();
  expect(walk).not.toMatch(/"priceVersion":"\d{4}-/);
  const script = walk.replace(/^export TES_URL=.*$/m, `export TES_URL=${stack.baseUrl}`).replace(/^export TES_API_KEY=.*$/m, `export TES_API_KEY=${secret}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tes-readme-'));
  try {
    const run = await bash(script, dir);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(run.stdout).toContain('"status":"succeeded"');
    const png = readFileSync(path.join(dir, 'hello.png'));
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
