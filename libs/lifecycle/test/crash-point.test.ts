import { spawnSync } from 'node:child_process';
import path from 'node:path';

// Runs the compiled module in a child process, since a reached crash point kills its process.
const dist = path.resolve(__dirname, '../dist/index.js');

function run(spec: string | undefined, script: string) {
  const env = { ...process.env };
  if (spec === undefined) delete env.TES_FAULT_CRASH_AT;
  else env.TES_FAULT_CRASH_AT = spec;
  return spawnSync(process.execPath, ['-e', `const { crashPoint } = require(${JSON.stringify(dist)}); ${script}; console.log('alive')`], {
    env,
    encoding: 'utf8',
  });
}

it('kills the process with SIGKILL at the named point', () => {
  const r = run('gateway.submit.after_commit', "crashPoint('gateway.submit.after_commit')");
  expect(r.signal).toBe('SIGKILL');
  expect(r.stdout).not.toContain('alive');
});

it('does nothing when unset or for other points', () => {
  expect(run(undefined, "crashPoint('x')").stdout).toContain('alive');
  expect(run('other.point,another', "crashPoint('x')").stdout).toContain('alive');
});

it('name@N crashes at the N-th pass', () => {
  const r = run('x@3', "crashPoint('x'); crashPoint('x'); console.log('two passes'); crashPoint('x')");
  expect(r.stdout).toContain('two passes');
  expect(r.signal).toBe('SIGKILL');
});
