import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The README is what a user needs on day one (issue #30): short, and its two commands are the
 * ones CI runs, so a fresh clone that follows it runs what CI does.
 */
const ROOT = path.join(__dirname, '../..');
const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

test('the README stays under 300 lines: the rest lives in docs/', () => {
  expect(readme.split('\n').length).toBeLessThanOrEqual(300);
});

test(".ci/run's test command is the README's", () => {
  const ci = readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
  const lastCommand = ci.trim().split('\n').at(-1)!.trim();
  expect(lastCommand).toBe('npm test');
  const section = readme.slice(readme.indexOf('## The two commands'));
  const commands = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  expect(commands.split('\n').map((l) => l.replace(/#.*$/, '').trim())).toContain(lastCommand);
});

test('the README says that PostgreSQL and RabbitMQ must be running, and how to start them', () => {
  expect(readme).toMatch(/PostgreSQL and RabbitMQ, running/);
  expect(readme).toContain('rabbitmq-server -detached');
  expect(readme).toContain('pg_ctlcluster');
});
