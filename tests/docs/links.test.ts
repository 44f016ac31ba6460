import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * `npm run lint:links` (scripts/check-links.js): a clone has no link that leads outside it, and
 * no link or `docs/…` reference in a comment that leads nowhere. Each case plants one problem in
 * a small repository of its own and expects the check to name it and fail.
 * check-links: ignore-file (the cases below plant broken links in this text)
 */
const CHECK = path.join(__dirname, '../../scripts/check-links.js');
const REPO = path.join(__dirname, '../..');

function check(root: string): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CHECK, '--root', root], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

let root: string;
beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'tes-links-'));
  mkdirSync(path.join(root, 'docs'));
  mkdirSync(path.join(root, 'libs/core/src'), { recursive: true });
  writeFileSync(path.join(root, 'docs/api.md'), '# The API\n\n## Errors\n\n## Errors\n\n### `Prefer: wait=N` (RFC 7240)\n');
  writeFileSync(path.join(root, 'docs/console.png'), '');
  writeFileSync(
    path.join(root, 'README.md'),
    [
      '# Tool',
      '![the console](docs/console.png) [errors](docs/api.md#errors), [again](docs/api.md#errors-1),',
      '[wait](docs/api.md#prefer-waitn-rfc-7240), [here](#tool), [web](https://example.com/x.md)',
      '```sh',
      '[not a link](nowhere.md)',
      '```',
      'and `[code](nowhere.md)` is text.',
      '',
    ].join('\n'),
  );
  writeFileSync(path.join(root, 'libs/core/src/errors.ts'), '/** The codes (docs/api.md#errors). */\nexport const x = 1;\n');
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function plant(file: string, text: string): void {
  writeFileSync(path.join(root, file), text);
}

test('a repository whose links all resolve passes', () => {
  expect(check(root)).toEqual({ status: 0, stderr: '' });
});

test('a markdown link to a missing file fails, with its file and line', () => {
  plant('docs/ops.md', '# Ops\n\nSee [the guide](guide.md).\n');
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stderr).toContain('docs/ops.md:3: guide.md: no such file');
});

test('a link to a heading that does not exist fails', () => {
  plant('docs/ops.md', '# Ops\n\n[codes](api.md#error-codes)\n');
  expect(check(root).stderr).toContain('docs/ops.md:3: api.md#error-codes: no heading #error-codes in docs/api.md');
});

test('a link that leaves the repository fails, even to a file that exists there', () => {
  const beside = `${root}-beside.md`;
  writeFileSync(beside, '# Beside\n');
  const name = path.basename(beside);
  plant('README.md', `# Tool\n\n[outside](../${name}) [spec](../shared/spec/x.md)\n`);
  const r = check(root);
  rmSync(beside);
  expect(r.status).toBe(1);
  expect(r.stderr).toContain(`README.md:3: ../${name}: leads outside the repository`);
  expect(r.stderr).toContain('README.md:3: names a folder beside the repository (../shared/…)');
});

test("a comment's docs/ reference to a missing file or heading fails", () => {
  plant('libs/core/src/states.ts', '// the moves: docs/api.md#states-and-moves\n// docs/moves.md\nexport const y = 2;\n');
  const r = check(root);
  expect(r.status).toBe(1);
  expect(r.stderr).toContain('libs/core/src/states.ts:1: docs/api.md#states-and-moves: no heading');
  expect(r.stderr).toContain('libs/core/src/states.ts:2: docs/moves.md: no such file');
});

test('a comment naming a document that lives outside the repository fails', () => {
  plant('libs/core/src/ids.ts', '/** Prefixes (api-contract.md, "ID form"). */\nexport const z = 3;\n');
  expect(check(root).stderr).toContain('libs/core/src/ids.ts:1: names api-contract.md (now docs/api.md)');
});

test('this repository passes', () => {
  expect(check(REPO)).toEqual({ status: 0, stderr: '' });
});
