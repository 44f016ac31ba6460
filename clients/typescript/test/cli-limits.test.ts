import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Catalog, DEFAULT_PRICE_LIST } from '@tes/catalog';
import { MAX_UPLOAD_BYTES as GATEWAY_MAX_UPLOAD_BYTES } from '@tes/core';
import { main } from '../src/cli/main';
import { MAX_UPLOAD_BYTES, TesClient, UploadTooLargeError } from '../src';

/**
 * The CLI's limits (issue #29): it uploaded a 13 MB file whole before the gateway refused it,
 * its answer to a 413 omitted details.limitBytes, and `tes tools` wrapped its PRICE column
 * mid-word at 80 columns. A small HTTP server stands in for the gateway: it serves the real
 * catalog (the same Catalog and price list the gateway describes) and records every request.
 */
let server: Server;
let url: string;
let dir: string;
const seen: string[] = [];
let uploadAnswer: { status: number; body: unknown } = { status: 200, body: {} };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tes-cli-limits-'));
  const catalog = new Catalog({ enableTestTools: true, providers: { replicate: true, fal: true, openai: true } });
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => {
      const [status, body] =
        req.url === '/tools' ? [200, { data: catalog.describe(DEFAULT_PRICE_LIST, '2026-11-26.1', true) }] : [uploadAnswer.status, uploadAnswer.body];
      res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_1' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function tes(args: string[], columns?: number): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = { isTTY: columns !== undefined, ...(columns ? { columns } : {}), write: (s: string) => (stdout += s) };
  const err = { isTTY: false, write: (s: string) => (stderr += s) };
  const code = await main(args, { TES_API_KEY: 'tes_test', TES_URL: url }, { stdout: out, stderr: err, stdin: undefined } as never);
  return { code, stdout, stderr };
}

const png = (size: number): Buffer => {
  const b = Buffer.alloc(size);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(b);
  return b;
};

it('the SDK knows the gateway limit of an upload', () => {
  expect(typeof MAX_UPLOAD_BYTES).toBe('number');
  expect(MAX_UPLOAD_BYTES).toBe(GATEWAY_MAX_UPLOAD_BYTES);
});

it('a file above the upload limit is refused before anything is sent, with the limit', async () => {
  const big = join(dir, 'big.png');
  await writeFile(big, png(13 * 1000 * 1000));
  seen.length = 0;
  const ran = await tes(['upload', big]);
  expect(ran.code).toBe(1);
  expect(ran.stderr).toBe(`tes upload: ${big} is 12.4 MiB (13,000,000 bytes); an upload is at most 12 MiB (12,582,912 bytes); nothing was sent\n`);
  expect(seen).toEqual([]);
  // The SDK itself, with bytes: the same refusal, nothing sent.
  const client = new TesClient({ apiKey: 'tes_test', baseUrl: url });
  await expect(client.upload(png(MAX_UPLOAD_BYTES + 1))).rejects.toBeInstanceOf(UploadTooLargeError);
  expect(seen).toEqual([]);
});

it('a 413 names the limit the gateway gave', async () => {
  const small = join(dir, 'small.png');
  await writeFile(small, png(100));
  uploadAnswer = { status: 413, body: { error: { status: 'INVALID_ARGUMENT', message: 'request_too_large', details: { limitBytes: 65_536 } } } };
  const ran = await tes(['upload', small]);
  expect(ran.code).toBe(1);
  expect(ran.stderr).toBe('tes upload: the request is too large: the gateway takes at most 64 KiB (65,536 bytes)\n');
});

it('tes tools fits 80 columns: the PRICE column wraps between words, under itself', async () => {
  const ran = await tes(['tools'], 80);
  expect(ran.code).toBe(0);
  const lines = ran.stdout.split('\n');
  for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
  const header = lines.find((l) => l.startsWith('TOOL'))!;
  const priceAt = header.indexOf('PRICE');
  // A continuation line is blank up to the PRICE column and starts a word there.
  const continued = lines.filter((l) => l.startsWith(' '.repeat(priceAt)));
  expect(continued.length).toBeGreaterThan(0);
  for (const l of continued) expect(l[priceAt]).not.toBe(' ');
  // Every price word of the catalog appears whole on some line.
  const rows = lines.slice(lines.indexOf(header) + 1).filter((l) => l.trim() && !l.startsWith('tes tools NAME') && !l.startsWith('a step that'));
  const prices = rows.map((l) => l.slice(priceAt).trim()).join(' ');
  expect(prices).toContain('from $0.');
  expect(prices).not.toMatch(/\S-\s/); // no word cut with a hyphen
});
