import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { useStack } from '../stack';

/**
 * A caller's client, generated from services/gateway/openapi.json as a caller would generate it:
 * `openapi-typescript` with its default flags, called through `openapi-fetch`, the program
 * compiled with `tsc` in strict mode. It must type-check, wrong arguments must not, and the
 * compiled program must quote, submit (`Prefer: wait`) and read an execution on a real stack.
 */
const stack = useStack();

const ROOT = join(__dirname, '../..');
const run = promisify(execFile);

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tes-generated-client-'));
  // the caller's project: its own folder, with this repository's openapi-fetch (a root devDependency), typescript and @types/node
  expect(require.resolve('openapi-fetch')).toContain(join(ROOT, 'node_modules'));
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  await run(process.execPath, [
    join(ROOT, 'node_modules/openapi-typescript/bin/cli.js'),
    join(ROOT, 'services/gateway/openapi.json'),
    '--output',
    join(dir, 'schema.ts'),
  ]);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  await writeFile(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        types: ['node'],
        outDir: 'out',
        skipLibCheck: false,
      },
      files: ['program.ts'],
    }),
  );
  await writeFile(join(dir, 'tsconfig.wrong.json'), JSON.stringify({ extends: './tsconfig.json', compilerOptions: { noEmit: true }, files: ['wrong.ts'] }));
  await writeFile(join(dir, 'program.ts'), PROGRAM);
  await writeFile(join(dir, 'wrong.ts'), wrongProgram().text);
}, 60_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** tsc's diagnostics for one of the folder's projects: '' when it compiles. */
async function tsc(project: string): Promise<string> {
  try {
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, project), '--pretty', 'false'], { cwd: dir });
    return '';
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err);
  }
}

it('the program type-checks, and quotes, submits with Prefer: wait and reads through the generated client', async () => {
  expect(await tsc('tsconfig.json')).toBe('');
  const p = await stack.seed({ creditMicros: 1_000_000 });
  const { stdout } = await run(process.execPath, [join(dir, 'out/program.js')], {
    env: { ...process.env, TES_BASE_URL: stack.baseUrl, TES_API_KEY: p.secret },
  });
  const out = JSON.parse(stdout) as Record<string, { status: number; data: Record<string, unknown> }>;
  expect(out.quote).toMatchObject({ status: 200, data: { tool: 'image.render', model: 'sharp', currency: 'usd' } });
  expect(out.submit).toMatchObject({ status: 200, data: { tool: 'image.render', status: 'succeeded' } });
  expect(out.get).toMatchObject({ status: 200, data: { id: out.submit!.data.id, status: 'succeeded' } });
  expect(out.tool).toMatchObject({ status: 200, data: { name: 'image.render' } });
}, 240_000);

it('wrong tool names and arguments do not type-check', async () => {
  const errors = await tsc('tsconfig.wrong.json');
  const lines = [...errors.matchAll(/wrong\.ts\((\d+),\d+\): error TS\d+/g)].map((m) => Number(m[1]));
  // every wrong call has an error of its own, within its lines
  const { calls } = wrongProgram();
  const unrefused = calls.filter((c) => !lines.some((l) => l >= c.from && l <= c.to)).map((c) => c.why);
  expect(unrefused).toEqual([]);
  expect(lines.length).toBeGreaterThanOrEqual(calls.length);
}, 180_000);

/** A caller's program: generated types, openapi-fetch, default settings. Prints what it got. */
const PROGRAM = `import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

const client = createClient<paths>({ baseUrl: process.env.TES_BASE_URL!, headers: { Authorization: \`Bearer \${process.env.TES_API_KEY!}\` } });

// the issue's example: arguments typed by the tool named beside them
const quote = await client.POST('/tools/quote', { body: { tool: 'image.render', arguments: { text: 'Hello from a generated client', width: 64, height: 64 } } });
if (!quote.data) throw new Error(\`quote: \${quote.response.status} \${JSON.stringify(quote.error)}\`);
const q = quote.data.data;

const submit = await client.POST('/tools/{tool}', {
  params: { path: { tool: 'image.render' }, header: { 'Idempotency-Key': 'generated-client-0001', Prefer: 'wait=30' } },
  body: {
    tool: 'image.render',
    arguments: { text: 'Hello from a generated client', width: 64, height: 64 },
    priceVersion: q.priceVersion,
    maximumChargeMicros: q.maximumChargeMicros,
  },
});
if (!submit.data) throw new Error(\`submit: \${submit.response.status} \${JSON.stringify(submit.error)}\`);
const id: string = submit.data.data.id;

const get = await client.GET('/tools/executions/{id}', { params: { path: { id } } });
if (!get.data) throw new Error(\`get: \${get.response.status} \${JSON.stringify(get.error)}\`);

const tool = await client.GET('/tools/{tool}', { params: { path: { tool: 'image.render' } } });
if (!tool.data) throw new Error(\`tool: \${tool.response.status} \${JSON.stringify(tool.error)}\`);

console.log(
  JSON.stringify({
    quote: { status: quote.response.status, data: q },
    submit: { status: submit.response.status, data: submit.data.data },
    get: { status: get.response.status, data: get.data.data },
    tool: { status: tool.response.status, data: tool.data.data },
  }),
);
`;

/** Calls that must not compile, each with why. */
const WRONG: [why: string, call: string][] = [
  ['a misspelt argument', `client.POST('/tools/quote', { body: { tool: 'image.render', arguments: { txet: 'x' } } });`],
  ['a wrong type', `client.POST('/tools/quote', { body: { tool: 'image.render', arguments: { text: 42 } } });`],
  ['a value outside the enum', `client.POST('/tools/quote', { body: { tool: 'image.render', arguments: { text: 'x', format: 'gif' } } });`],
  ['a tool that does not exist', `client.POST('/tools/quote', { body: { tool: 'image.rendr', arguments: { text: 'x' } } });`],
  ['a required argument missing', `client.POST('/tools/quote', { body: { tool: 'test.sleep', arguments: { seconds: 1, steps: 1 } } });`],
  [
    "another tool's arguments",
    `client.POST('/tools/{tool}', { params: { path: { tool: 'test.sleep' }, header }, body: { tool: 'test.sleep', arguments: { text: 'x' }, priceVersion: 'v', maximumChargeMicros: 1 } });`,
  ],
  [
    'money that is not a number',
    `client.POST('/tools/{tool}', { params: { path: { tool: 'test.sleep' }, header }, body: { tool: 'test.sleep', arguments: { seconds: 0, steps: 1, costMicrosPerStep: 1 }, priceVersion: 'v', maximumChargeMicros: 'all' } });`,
  ],
];

/** wrong.ts: the calls of WRONG, one per line after a prologue, and the lines of each. */
function wrongProgram(): { text: string; calls: { why: string; from: number; to: number }[] } {
  const prologue = [
    `import createClient from 'openapi-fetch';`,
    `import type { paths } from './schema.js';`,
    `const client = createClient<paths>({ baseUrl: 'http://localhost' });`,
    `const header = { 'Idempotency-Key': 'generated-client-0002' };`,
  ];
  const calls = WRONG.map(([why], i) => ({ why, from: prologue.length + i + 1, to: prologue.length + i + 1 }));
  return { text: [...prologue, ...WRONG.map(([, call]) => `void ${call}`)].join('\n') + '\n', calls };
}
