import { createDb } from '@tes/db';
import { useTestDatabase } from '@tes/testing';
import { startFakeProviders, type FakeProviders } from '../../../tests/fake-providers';
import { runCli } from '../src/cli';
import type { CliSettings } from '../src/spec';

/**
 * `admin models check` (issue #28): each provider model of the catalog is looked up at its
 * provider (OpenAI GET /models/{id}, Replicate GET /models/{owner}/{name}, fal's platform API),
 * here the fakes that answer like them, and compared with our retirement date. A mismatch,
 * or a model that could not be checked, exits 1.
 */
const { database } = useTestDatabase({ poolMax: 1 });
let fake: FakeProviders;

beforeAll(async () => {
  fake = await startFakeProviders();
});
afterAll(async () => {
  await fake?.stop();
});

function settings(over: Partial<CliSettings['providers'] & object> = {}, retirements: Record<string, string> = {}): CliSettings {
  return {
    webhookAllowPrivate: false,
    modelRetirements: retirements,
    providers: {
      baseUrls: { openai: fake.env.OPENAI_BASE_URL!, replicate: fake.env.REPLICATE_BASE_URL!, falApi: fake.env.FAL_API_URL! },
      credentials: { openai: 'test-openai', replicate: 'test-replicate', fal: 'test-fal' },
      ...over,
    },
  };
}

interface Row {
  model: string;
  provider: string;
  providerModel: string;
  providerStatus: string;
  retiresOn: string | null;
  result: 'ok' | 'mismatch' | 'unchecked' | 'skipped';
}

async function check(s: CliSettings, ...extra: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    ['models', 'check', ...extra],
    () => createDb({ url: database.url, poolMax: 1 }),
    { out: (t) => out.push(t), err: (t) => err.push(t) },
    s,
  );
  return { code, out: out.join('\n'), err: err.join('\n'), rows: () => (JSON.parse(out.join('\n')) as { models: Row[] }).models };
}

const row = (rows: Row[], model: string) => rows.find((r) => r.model === model)!;

it('every model agrees with its provider: exit 0, one row per provider model', async () => {
  const r = await check(settings());
  expect(r.code).toBe(0);
  const rows = r.rows();
  expect(rows.map((x) => [x.model, x.providerModel, x.result])).toEqual([
    ['image.generate:replicate/flux-schnell', 'black-forest-labs/flux-schnell', 'ok'],
    ['image.generate:fal/flux-schnell', 'fal-ai/flux/schnell', 'ok'],
    ['image.generate:openai/gpt-image-1.5', 'gpt-image-1.5', 'ok'],
    ['image.generate:openai/gpt-image-1', 'gpt-image-1', 'ok'],
    ['audio.speech:openai/gpt-4o-mini-tts', 'gpt-4o-mini-tts', 'ok'],
    ['video.generate:replicate/kling-v1.6-standard', 'kwaivgi/kling-v1.6-standard', 'ok'],
    ['video.generate:fal/kling-video-v1-standard', 'fal-ai/kling-video/v1/standard/text-to-video', 'ok'],
  ]);
  expect(row(rows, 'image.generate:openai/gpt-image-1')).toMatchObject({ providerStatus: 'shut down on 2026-10-23', retiresOn: '2026-10-23' });
  expect(row(rows, 'image.generate:fal/flux-schnell')).toMatchObject({ providerStatus: 'active', retiresOn: null });
  expect(fake.requests.some((q) => q.path === '/openai/v1/models/gpt-4o-mini-tts' && q.authorization === 'Bearer test-openai')).toBe(true);
});

it('a shutdown date the provider announced that we do not have is a mismatch (exit 1) until MODEL_RETIREMENTS says it', async () => {
  fake.models.openai['gpt-4o-mini-tts'] = '2027-01-06';
  try {
    const r = await check(settings());
    expect(r.code).toBe(1);
    expect(row(r.rows(), 'audio.speech:openai/gpt-4o-mini-tts')).toMatchObject({
      providerStatus: 'shuts down on 2027-01-06',
      retiresOn: null,
      result: 'mismatch',
    });
    const set = await check(settings({}, { 'audio.speech:openai/gpt-4o-mini-tts': '2027-01-06' }));
    expect(set.code).toBe(0);
    expect(row(set.rows(), 'audio.speech:openai/gpt-4o-mini-tts')).toMatchObject({ retiresOn: '2027-01-06', result: 'ok' });
  } finally {
    fake.models.openai['gpt-4o-mini-tts'] = null;
  }
});

it('a model the provider no longer has, or marks deprecated, while we offer it is a mismatch', async () => {
  const kept = [...fake.models.replicate];
  fake.models.replicate.splice(0, fake.models.replicate.length, 'kwaivgi/kling-v1.6-standard');
  fake.models.fal['fal-ai/flux/schnell'] = 'deprecated';
  try {
    const r = await check(settings());
    expect(r.code).toBe(1);
    expect(row(r.rows(), 'image.generate:replicate/flux-schnell')).toMatchObject({ providerStatus: 'not found (HTTP 404)', result: 'mismatch' });
    expect(row(r.rows(), 'image.generate:fal/flux-schnell')).toMatchObject({ providerStatus: 'deprecated', result: 'mismatch' });
  } finally {
    fake.models.replicate.splice(0, fake.models.replicate.length, ...kept);
    fake.models.fal['fal-ai/flux/schnell'] = 'active';
  }
});

it('a provider without a credential is skipped (exit 0); one that cannot be read leaves its models unchecked (exit 1)', async () => {
  const none = await check(settings({ credentials: {} }));
  expect(none.code).toBe(0);
  expect(new Set(none.rows().map((x) => x.result))).toEqual(new Set(['skipped']));
  expect(none.err).toMatch(/no provider credential is configured/);
  const closed = await check(
    settings({ baseUrls: { openai: 'http://127.0.0.1:9/v1', replicate: fake.env.REPLICATE_BASE_URL!, falApi: fake.env.FAL_API_URL! } }),
  );
  expect(closed.code).toBe(1);
  expect(row(closed.rows(), 'image.generate:openai/gpt-image-1.5')).toMatchObject({ result: 'unchecked' });
  expect(row(closed.rows(), 'image.generate:openai/gpt-image-1.5').providerStatus).toMatch(/^unreachable/);
  expect(row(closed.rows(), 'image.generate:fal/flux-schnell').result).toBe('ok');
  const refused = await check(settings({ credentials: { openai: 'wrong', replicate: 'test-replicate', fal: 'test-fal' } }));
  expect(row(refused.rows(), 'image.generate:openai/gpt-image-1.5')).toMatchObject({ providerStatus: 'credential refused (HTTP 401)', result: 'unchecked' });
});

it('prints a table on request, and --help says what it checks', async () => {
  const r = await check(settings(), '--table');
  expect(r.out.split('\n')[0]).toMatch(/^MODEL\s+PROVIDER\s+PROVIDER MODEL\s+PROVIDER STATUS\s+OUR RETIREMENT\s+RESULT$/);
  expect(r.out).toMatch(/image\.generate:openai\/gpt-image-1\s+openai\s+gpt-image-1\s+shut down on 2026-10-23\s+2026-10-23\s+ok/);
  const help = await check(settings(), '--help');
  expect(help.code).toBe(0);
  expect(help.out).toMatch(/GET \/v1\/models\/\{id\}/);
  expect(help.out).toMatch(/MODEL_RETIREMENTS/);
  expect(help.out).toMatch(/Exit status/);
});
