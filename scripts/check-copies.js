// `npm run lint:copies`: the copy-paste budget of non-test code. jscpd (.jscpd.json: six lines
// or more of the same token shape; tests, generated files and migrations left out) lists the
// clones; this fails when there are more than BUDGET. Lower BUDGET when you remove one; never
// raise it to let a copy in (docs/development.md#the-copy-paste-budget).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const BUDGET = 7;

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tes-jscpd-'));
try {
  const root = path.join(__dirname, '..');
  execFileSync(process.execPath, [require.resolve('jscpd/run-jscpd.js'), '--reporters', 'json', '--output', out, '.'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const { duplicates } = JSON.parse(fs.readFileSync(path.join(out, 'jscpd-report.json'), 'utf8'));
  const where = (f) => `${f.name}:${f.start}-${f.end}`;
  const lines = duplicates.map((d) => `  ${where(d.firstFile)} ~ ${where(d.secondFile)} (${d.lines} lines)`);
  if (duplicates.length > BUDGET) {
    process.stderr.write(`${duplicates.length} clones in non-test code, over the budget of ${BUDGET}:\n${lines.join('\n')}\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write(`copy-paste budget: ${duplicates.length} of ${BUDGET} clones\n`);
  }
} finally {
  fs.rmSync(out, { recursive: true, force: true });
}
