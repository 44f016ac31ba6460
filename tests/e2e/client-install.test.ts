import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { useStack } from '../stack';

/**
 * The two clients installed as a user outside this repository installs them (issue #29: the
 * npm package was UNLICENSED, and `pip install --no-index clients/python` failed for want of
 * setuptools from a registry). Each goes into a fresh folder under the system's temporary
 * directory, by the README's commands (npm pack; pip install --no-index), and a script there
 * imports it and calls this test's stack:
 * - TypeScript: `npm pack` of clients/typescript, then `npm install <tarball>` into a new project;
 *   an ES module and a CommonJS script call the API, a TypeScript file type-checks against the
 *   installed types, and the installed `tes` binary lists the tools.
 * - Python: `python3 -m venv`, then `pip install --no-index --no-build-isolation clients/python`;
 *   a script run from elsewhere calls the API.
 * Both check the refusal of a project without credit reads as a sentence with the amounts.
 */
const stack = useStack();
const REPO = path.resolve(__dirname, '../..');
const CLIENT = path.join(REPO, 'clients/typescript');
const PYTHON_CLIENT = path.join(REPO, 'clients/python');
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'tes-install-'));
});

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  stdout: string;
  output: string;
}

function run(cmd: string, args: string[], options: { cwd: string; env?: Record<string, string> }, timeoutMs = 120_000): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, output: `${stdout}${stderr}` }),
    );
  });
}

async function ok(what: string, ran: Promise<Ran>): Promise<Ran> {
  const r = await ran;
  if (r.code !== 0) throw new Error(`${what} exited with ${r.code}:\n${r.output}`);
  return r;
}

/** What each client's script prints: the catalog's size, a run's outcome and a refusal's message. */
interface Outcome {
  tools: number;
  status: string;
  charged: number;
  refusal: string;
}

const expectedRefusal =
  /^insufficient balance: the submit needs \$0\.001 reserved and the project has \$0\.000005 available \(insufficient_balance, HTTP 429, request \S+\)$/;

it('npm pack of the TypeScript SDK installs into a clean project, and its ESM, CommonJS, types and tes binary work', async () => {
  const main = await stack.seed({ creditMicros: 1_000_000 });
  const poor = await stack.seed({ creditMicros: 5 });
  // The tarball packs dist/: build it from today's sources first (incremental, fast when fresh).
  await ok('tsc -b clients/typescript', run(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', CLIENT], { cwd: REPO }));
  const packed = await ok('npm pack', run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: CLIENT }));
  const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  const files = info!.files.map((f) => f.path);
  expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json', 'bin/tes.js', 'dist/index.js', 'dist/index.d.ts', 'dist/cli.js']));
  expect(files.filter((f) => f.endsWith('.tsbuildinfo') || f.includes('test/'))).toEqual([]);

  const app = path.join(tmp, 'app');
  await mkdir(app);
  await writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'tes-sdk-try', version: '1.0.0', private: true }));
  await ok('npm install <tarball>', run('npm', ['install', '--no-audit', '--no-fund', '--offline', path.join(tmp, info!.filename)], { cwd: app }));

  const installed = JSON.parse(await readFile(path.join(app, 'node_modules/@tes/client/package.json'), 'utf8')) as Record<string, unknown>;
  expect(installed).toMatchObject({
    license: 'Apache-2.0',
    types: 'dist/index.d.ts',
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' }, './package.json': './package.json' },
  });
  expect(typeof installed.description).toBe('string');
  expect(existsSync(path.join(app, 'node_modules/@tes/client/LICENSE'))).toBe(true);

  const script = `
import { TesClient, InsufficientBalanceError } from '@tes/client';
const baseUrl = process.env.TES_URL;
const tes = new TesClient({ apiKey: process.env.TES_API_KEY, baseUrl });
const catalog = await tes.tools();
const result = await tes.run('test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 3 });
let refusal = 'none';
try {
  await new TesClient({ apiKey: process.env.TES_POOR_API_KEY, baseUrl }).run('test.sleep', { seconds: 0, steps: 1, costMicrosPerStep: 1000 });
} catch (err) {
  refusal = err instanceof InsufficientBalanceError ? err.message : 'unexpected: ' + String(err);
}
console.log(JSON.stringify({ tools: catalog.tools.length, status: result.execution.status, charged: result.execution.chargedMicros, refusal }));
`;
  await writeFile(path.join(app, 'try.mjs'), script);
  const env = { TES_URL: stack.baseUrl, TES_API_KEY: main.secret, TES_POOR_API_KEY: poor.secret };
  const esm = JSON.parse((await ok('node try.mjs', run(process.execPath, ['try.mjs'], { cwd: app, env }))).stdout) as Outcome;
  expect(esm).toMatchObject({ status: 'succeeded', charged: 3 });
  expect(esm.tools).toBeGreaterThan(1);
  expect(esm.refusal).toMatch(expectedRefusal);

  await writeFile(
    path.join(app, 'try.cjs'),
    `const { TesClient, ERROR_CODES } = require('@tes/client');\nconsole.log(typeof TesClient, ERROR_CODES.length > 0);\n`,
  );
  expect((await ok('node try.cjs', run(process.execPath, ['try.cjs'], { cwd: app }))).stdout.trim()).toBe('function true');

  // The installed types, as a caller's strict TypeScript project resolves them (node16 exports).
  await writeFile(
    path.join(app, 'try.ts'),
    `import { TesClient, type ToolArguments } from '@tes/client';\nconst args: ToolArguments<'image.render'> = { text: 'Hi' };\nexport const call = (t: TesClient) => t.quote('image.render', args);\n`,
  );
  const tsc = [require.resolve('typescript/bin/tsc'), '--noEmit', '--strict', '--module', 'node16', '--moduleResolution', 'node16', '--target', 'es2022'];
  await ok('tsc try.ts', run(process.execPath, [...tsc, '--typeRoots', path.join(REPO, 'node_modules/@types'), '--types', 'node', 'try.ts'], { cwd: app }));

  const tes = await ok('tes tools', run(path.join(app, 'node_modules/.bin/tes'), ['tools'], { cwd: app, env }));
  expect(tes.stdout).toContain('image.render');
}, 300_000);

it('the Python client installs with pip --no-index --no-build-isolation into a fresh venv, and calls the API', async () => {
  const main = await stack.seed({ creditMicros: 1_000_000 });
  const poor = await stack.seed({ creditMicros: 5 });
  const venv = path.join(tmp, 'venv');
  const env = { PYTHONPYCACHEPREFIX: path.join(tmp, 'pycache') };
  await ok('python3 -m venv', run('python3', ['-m', 'venv', venv], { cwd: tmp, env }));
  const python = path.join(venv, 'bin/python');
  await ok('pip install', run(python, ['-m', 'pip', 'install', '--no-index', '--no-build-isolation', PYTHON_CLIENT], { cwd: tmp, env }));

  const script = `
import json, os
from tes_client import TesClient, InsufficientBalanceError
import tes_client
assert os.path.realpath(tes_client.__file__).startswith(os.path.realpath(${JSON.stringify(venv)})), tes_client.__file__
tes = TesClient(os.environ["TES_API_KEY"], os.environ["TES_URL"])
tools = tes.tools()["tools"]
result = tes.run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 3})
try:
    TesClient(os.environ["TES_POOR_API_KEY"], os.environ["TES_URL"]).run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 1000})
    refusal = "none"
except InsufficientBalanceError as err:
    refusal = str(err)
print(json.dumps({"tools": len(tools), "status": result.execution["status"], "charged": result.execution["chargedMicros"], "refusal": refusal}))
`;
  await writeFile(path.join(tmp, 'try.py'), script);
  const ran = await ok(
    'python try.py',
    run(python, ['try.py'], { cwd: tmp, env: { ...env, TES_URL: stack.baseUrl, TES_API_KEY: main.secret, TES_POOR_API_KEY: poor.secret } }),
  );
  const outcome = JSON.parse(ran.stdout) as Outcome;
  expect(outcome).toMatchObject({ status: 'succeeded', charged: 3 });
  expect(outcome.tools).toBeGreaterThan(1);
  expect(outcome.refusal).toMatch(expectedRefusal);
  const license = await ok(
    'importlib.metadata',
    run(python, ['-c', "import importlib.metadata as m; print(m.metadata('tes-client')['License'])"], { cwd: tmp, env }),
  );
  expect(license.stdout.trim()).toBe('Apache-2.0');
}, 300_000);
