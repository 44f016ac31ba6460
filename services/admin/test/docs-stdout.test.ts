import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runCli } from '../src/cli';
import { COMMANDS } from '../src/commands';

/**
 * `npm run admin -- …` prints npm's banner ("> admin", "> npm run build … && node …") on stdout
 * before the command's own output, so `npm run admin -- prices export > prices.json` writes a
 * file `prices publish` cannot read, and `npm run admin -- ledger export … | jq` fails on the
 * banner. Every documented command whose stdout goes to a file or a pipe must keep npm quiet
 * (`npm run -s admin -- …`).
 */
const ROOT = path.resolve(__dirname, '../../..');

/** The shell lines of a text that run `npm run admin` (a line ending in `\` joined with the next). */
function adminLines(text: string): string[] {
  return text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .filter((l) => /npm run (-s |--silent )?admin\b/.test(l));
}

/** Whether the admin command's stdout goes to a file (`>`, not `2>`) or into a pipe. */
function stdoutCaptured(line: string): boolean {
  const after = line.slice(line.search(/npm run (-s |--silent )?admin\b/)).replace(/`.*$/, '');
  const command = after.split('#')[0]!.replace(/<[^<>\s]*>/g, '');
  return /(^|[^2&])>(?!&)/.test(command) || /\|(?!\|)/.test(command.replace(/\[[^\]]*\]/g, ''));
}

function loud(lines: string[]): string[] {
  return lines.filter((l) => stdoutCaptured(l) && !/npm run (-s|--silent) admin\b/.test(l));
}

test('the check sees a captured stdout without -s, and accepts one with it', () => {
  expect(loud(['npm run admin -- prices export > prices.json'])).toHaveLength(1);
  expect(loud(['npm run admin -- ledger export --project p --month 2026-11 --format jsonl \\\n  | jq -s .'].flatMap(adminLines))).toHaveLength(1);
  expect(loud(['npm run -s admin -- prices export > prices.json', 'npm run admin -- org list', 'npm run admin -- x 2> err.txt'])).toEqual([]);
  expect(loud(['npm run admin -- ledger export --project prj_… --month 2026-11 [--format csv|jsonl]', 'usage: npm run admin -- <command> [options]'])).toEqual(
    [],
  );
});

test('README, deploy/README and docs/: every admin command whose stdout is redirected or piped runs npm with -s', () => {
  const docs = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'));
  expect(docs).toContain('operations.md');
  for (const file of ['README.md', 'deploy/README.md', ...docs.map((f) => `docs/${f}`)]) {
    expect({ file, loud: loud(adminLines(readFileSync(path.join(ROOT, file), 'utf8'))) }).toEqual({ file, loud: [] });
  }
});

test("the admin CLI's own help and notes do too", async () => {
  const texts: string[] = [];
  const io = { out: (t: string) => texts.push(t), err: (t: string) => texts.push(t) };
  await runCli(['--help'], () => undefined as never, io);
  for (const c of COMMANDS) await runCli([...c.name.split(' '), '--help'], () => undefined as never, io);
  expect(loud(texts.flatMap(adminLines))).toEqual([]);
});
