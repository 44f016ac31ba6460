import { exampleText, secretMayBePrinted, type ExampleOptions } from '../../scripts/dev/src/example';

/**
 * `npm start` prints the seeded development key so the example can be pasted: fine on a
 * development stack, never with NODE_ENV=production, where the output may reach logs that
 * others read. Either way the banner says the key is a secret and how to revoke it.
 */
const options = (nodeEnv: string): ExampleOptions => ({
  baseUrl: 'http://127.0.0.1:8080',
  key: { keyId: 'key_01ARZ3NDEKTSV4RRFFQ69G5FAV', projectId: 'prj_01ARZ3NDEKTSV4RRFFQ69G5FAV', secret: `tes_AbCdEfGh_${'s'.repeat(32)}` },
  nodeEnv,
  quote: { priceVersion: '2026-11-22.1', maximumChargeMicros: 1000 },
  idempotencyKey: 'dev-example-1',
});

it('a development stack prints the key, says it is a secret and how to revoke it', () => {
  for (const nodeEnv of ['development', 'test']) {
    const o = options(nodeEnv);
    const text = exampleText(o);
    expect(secretMayBePrinted(nodeEnv)).toBe(true);
    // The variable the CLI and both SDKs read (issue #29: the banner exported TES_KEY).
    expect(text).toContain(`export TES_API_KEY=${o.key.secret}`);
    expect(text).not.toMatch(/\bTES_KEY\b/);
    expect(text).toContain('It is a secret');
    expect(text).toContain(`npm run admin -- key revoke --key ${o.key.keyId}`);
  }
});

it('with NODE_ENV=production the secret appears nowhere; the key id, how to revoke it and how to make one do', () => {
  const o = options('production');
  const text = exampleText(o);
  expect(secretMayBePrinted('production')).toBe(false);
  expect(text).not.toContain(o.key.secret);
  expect(text).not.toMatch(/tes_[0-9A-Za-z]{8}_/);
  expect(text).toContain(`npm run admin -- key revoke --key ${o.key.keyId}`);
  expect(text).toContain(`npm run admin -- key create --project ${o.key.projectId}`);
  expect(text).toContain('NODE_ENV=production');
  expect(text).toContain('export TES_API_KEY=...');
  expect(text).not.toMatch(/\bTES_KEY\b/);
});
