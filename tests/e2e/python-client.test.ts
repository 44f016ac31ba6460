import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createWebhookEndpoint, listWebhookDeliveries } from '@tes/db';
import { bearer, useStack, waitForExecution } from '../stack';

/**
 * The Python client (clients/python, standard library only) against the real stack: this file
 * starts the stack, seeds the projects the Python tests need, captures a webhook delivery that
 * the relay signed, then runs `python3 -m compileall`, a Python 3.9 syntax check and
 * `python3 -m unittest discover` with the URL and keys in the environment. A Python failure
 * fails this test with Python's output. PYTHON_UNITTEST_ARGS (e.g. "-k cancel") narrows the
 * Python run while debugging.
 */
const stack = useStack({
  env: {
    WEBHOOK_ALLOW_PRIVATE: '1',
    WEBHOOK_RETRY_DELAYS_MS: '200,200',
    // The Python tests share one key per project and poll fast: the 120/min default would make
    // them wait out the rate limit instead of testing the client (its 429 handling is tested
    // with an answer the test proxy makes).
    RATE_LIMIT_PER_MINUTE: '100000',
  },
});

const PACKAGE = path.resolve(__dirname, '../../clients/python');
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'tes-python-'));
});

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

interface Ran {
  code: number | null;
  output: string;
}

/** Runs python3 in the package folder; bytecode goes to a temporary folder, not the tree. */
function python(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      'python3',
      args,
      {
        cwd: PACKAGE,
        env: { ...process.env, ...env, PYTHONPYCACHEPREFIX: path.join(tmp, 'pycache'), PYTHONUNBUFFERED: '1' },
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, output: `${stdout}${stderr}` });
      },
    );
  });
}

function expectSuccess(what: string, ran: Ran): void {
  if (ran.code !== 0) throw new Error(`${what} exited with ${ran.code}:\n${ran.output}`);
}

/** One delivery of a real webhook: the relay signs it (libs/outbound), the Python client verifies it. */
async function captureWebhook(projectId: string, secret: string): Promise<{ secret: string; executionId: string; deliveries: unknown[] }> {
  const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const endpoint = await createWebhookEndpoint(stack.db, { projectId, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` });
    const args = { seconds: 0, steps: 1, costMicrosPerStep: 3 };
    const q = await stack.http().post('/tools/quote').set(bearer(secret)).send({ tool: 'test.sleep', arguments: args });
    const sub = await stack
      .http()
      .post('/tools/test.sleep')
      .set({ ...bearer(secret), 'Idempotency-Key': 'python-webhook-1' })
      .send({ tool: 'test.sleep', arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
    expect(sub.status).toBe(202);
    const executionId = sub.body.data.id as string;
    await waitForExecution(stack, secret, executionId);
    const until = Date.now() + 20_000;
    while ((await listWebhookDeliveries(stack.db, executionId))[0]?.status !== 'delivered' && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(got.length).toBeGreaterThanOrEqual(1);
    return { secret: endpoint.secret, executionId, deliveries: got };
  } finally {
    await new Promise((r) => server.close(r));
  }
}

it('compiles under the running python3, and parses as Python 3.9', async () => {
  expectSuccess('python3 -m compileall', await python(['-m', 'compileall', '-q', 'tes_client', 'tests']));
  // ast's feature_version refuses syntax newer than 3.9 (match, except*, parenthesised context managers, …).
  const check = [
    'import ast, pathlib, sys',
    'bad = []',
    'for p in sorted(pathlib.Path(".").rglob("*.py")):',
    '    try: ast.parse(p.read_text(encoding="utf-8"), str(p), feature_version=(3, 9))',
    '    except SyntaxError as e: bad.append(f"{p}:{e.lineno}: {e.msg}")',
    'print("\\n".join(bad)); sys.exit(1 if bad else 0)',
  ].join('\n');
  expectSuccess('the Python 3.9 syntax check', await python(['-c', check]));
});

it('passes its unittest suite against the real stack', async () => {
  const main = await stack.seed({ creditMicros: 50_000_000 });
  const poor = await stack.seed({ creditMicros: 5 });
  const capped = await stack.seed({ creditMicros: 1_000_000, monthlyCapMicros: 10 });
  const webhook = await captureWebhook(main.projectId, main.secret);
  const webhookFile = path.join(tmp, 'webhook.json');
  await writeFile(webhookFile, JSON.stringify(webhook));
  const extra = (process.env.PYTHON_UNITTEST_ARGS ?? '').split(' ').filter(Boolean);
  const ran = await python(
    ['-m', 'unittest', 'discover', '-s', 'tests', '-t', '.', ...extra],
    {
      TES_URL: stack.baseUrl,
      TES_API_KEY: main.secret,
      TES_POOR_API_KEY: poor.secret,
      TES_CAPPED_API_KEY: capped.secret,
      TES_WEBHOOK_FILE: webhookFile,
    },
    240_000,
  );
  expectSuccess('python3 -m unittest', ran);
  // unittest prints "Ran N tests" and "OK"; a suite that found nothing would also exit 0.
  const count = /Ran (\d+) tests?/.exec(ran.output);
  expect(Number(count?.[1] ?? 0)).toBeGreaterThanOrEqual(extra.length > 0 ? 1 : 20);
}, 300_000);
