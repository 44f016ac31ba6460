import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { addKey, type SeededProject } from '@tes/testing';
import { bearer, useStack, waitForExecution } from '../stack';
import { launchChromium, pageProblems, shoot } from './browser';

/**
 * The console's webhooks page (#webhooks, issue #29) in a real browser: add an endpoint and see
 * its secret once, send a test event that the receiver verifies with that secret (npm
 * standardwebhooks), read a real delivery, rotate, delete; a MEMBER key is told it cannot.
 * WEBHOOK_ALLOW_PRIVATE lets the service reach this file's receiver on loopback.
 */
const stack = useStack({ env: { WEBHOOK_ALLOW_PRIVATE: '1', WEBHOOK_TIMEOUT_MS: '2000' } });
let browser: Browser;
let page: Page;
let problems: string[];
let main: SeededProject;
const got: { headers: Record<string, string>; body: string }[] = [];
let receiver: http.Server;
let receiverUrl: string;

beforeAll(async () => {
  const built = await fetch(`${stack.baseUrl}/console`);
  if (built.status !== 200) throw new Error(`GET /console answered ${built.status}: run npm run build:console first`);
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/tes`;
  browser = await launchChromium();
  main = await stack.seed({ creditMicros: 10_000_000 });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(20_000);
  problems = pageProblems(page);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => receiver?.close(r));
});

afterEach(() => {
  // the only failed request is the refused URL's 400, which the page shows
  expect(problems.filter((p) => !/^400 |status of 400 /.test(p))).toEqual([]);
  problems.length = 0;
});

async function signIn(secret: string): Promise<void> {
  await page.goto(`${stack.baseUrl}/console`);
  await page.getByLabel('API key').fill(secret);
  await page.keyboard.press('Enter');
  await page.locator('.account').waitFor();
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
}

async function until(done: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the webhooks page', () => {
  it('adds an endpoint, shows its secret once, sends a test event the receiver verifies, lists a real delivery, rotates and deletes', async () => {
    await signIn(main.secret);
    await page.getByText('No endpoints yet.').waitFor();

    // a URL the API refuses: its reason, beside the field's path, in words
    await page.getByLabel('Endpoint URL').fill('https://user:pw@example.com/hook');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.locator('.error-box[data-code="invalid_request"]').waitFor();
    expect(await page.locator('.error-box').textContent()).toContain('must not carry credentials');

    await page.getByLabel('Endpoint URL').fill(receiverUrl);
    await page.getByLabel('execution.cancelled').uncheck();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const once = page.locator('.secret-once');
    await once.waitFor();
    expect(await page.locator('.error-box').count()).toBe(0);
    const secret = ((await once.locator('code').textContent()) ?? '').trim();
    expect(secret).toMatch(/^whsec_/);
    const item = page.locator('li.endpoint');
    expect(await item.locator('.endpoint-url').textContent()).toBe(receiverUrl);
    expect(await item.textContent()).toContain('execution.succeeded, execution.failed, execution.needs_review');

    await item.getByRole('button', { name: 'Send test event' }).click();
    await item
      .locator('[data-test-result]')
      .getByText(/^Delivered: the receiver answered 204/)
      .waitFor();
    expect(got).toHaveLength(1);
    expect(new Webhook(secret).verify(got[0]!.body, got[0]!.headers)).toMatchObject({ type: 'webhook.test' });

    // a real event: an execution of this project ends, the relay delivers it, the page lists it
    const args = { seconds: 0, steps: 1, costMicrosPerStep: 10 };
    const q = await stack.http().post('/tools/quote').set(bearer(main.secret)).send({ tool: 'test.sleep', arguments: args });
    const sub = await stack
      .http()
      .post('/tools/test.sleep')
      .set({ ...bearer(main.secret), 'Idempotency-Key': 'console-hook-1' })
      .send({ tool: 'test.sleep', arguments: args, priceVersion: q.body.data.priceVersion, maximumChargeMicros: q.body.data.maximumChargeMicros });
    await waitForExecution(stack, main.secret, sub.body.data.id as string);
    await until(() => got.length >= 2);
    expect(new Webhook(secret).verify(got[1]!.body, got[1]!.headers)).toMatchObject({ type: 'execution.succeeded', data: { id: sub.body.data.id } });
    await until(async () => (await stack.db('webhook_deliveries').where({ status: 'delivered' }).count())[0]!.count === 1);
    await item.getByRole('button', { name: 'Recent deliveries' }).click();
    const row = item.locator('table.deliveries tbody tr');
    await row.waitFor();
    expect(await row.textContent()).toContain('execution.succeeded');
    expect(await row.locator('.badge').textContent()).toBe('delivered');
    await shoot(page, 'webhooks');

    await page.getByRole('button', { name: 'Done' }).click();
    await item.getByRole('button', { name: 'Rotate secret' }).click();
    await once.waitFor();
    const rotated = ((await once.locator('code').textContent()) ?? '').trim();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    expect(await once.textContent()).toContain('rotated');

    await item.getByRole('button', { name: 'Delete' }).click();
    await item.getByRole('button', { name: 'Really delete?' }).click();
    await page.getByText('No endpoints yet.').waitFor();
    expect(await stack.db('webhook_endpoints').whereNull('deleted_at').count()).toEqual([{ count: 0 }]);
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  it('a MEMBER key is told that webhooks need an ADMIN key, and asks nothing', async () => {
    const member = await addKey(stack.db, main.projectId, { role: 'MEMBER', name: 'member' });
    await signIn(member.secret);
    await page.locator('[data-note="admin-only"]').waitFor();
    expect(await page.locator('[data-note="admin-only"]').textContent()).toContain('ADMIN');
    expect(await page.locator('form.webhook-create').count()).toBe(0);
    await page.getByRole('button', { name: 'Sign out' }).click();
  });
});
