import { ProviderContracts, type ProviderExchange } from '@tes/testing';
import { startFakeProviders } from '../fake-providers';

/**
 * The provider contracts themselves: every schema compiles, answers the providers are
 * documented or recorded to send pass, answers they would never send are caught, and the
 * fake providers cannot send (or accept) one without the test that used them failing.
 */
const contracts = new ProviderContracts();
const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const replicateGet: ProviderExchange = { provider: 'replicate', method: 'GET', path: '/predictions/gm3qorzdhgbfurvjtvhg6dckhu' };
const falResult: ProviderExchange = { provider: 'fal', method: 'GET', path: '/fal-ai/flux/requests/r1', endpoint: 'fal-ai/flux/schnell' };

it('every schema file compiles', () => {
  expect(contracts.schemaFiles().length).toBeGreaterThanOrEqual(15);
});

describe('documented and recorded answers pass', () => {
  it.each([
    // Replicate's predictions.get example in its openapi.json (urls.web added by today's document)
    [
      replicateGet,
      200,
      'application/json',
      {
        id: 'gm3qorzdhgbfurvjtvhg6dckhu',
        model: 'replicate/hello-world',
        version: '5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa',
        input: { text: 'Alice' },
        logs: '',
        output: 'hello Alice',
        error: null,
        status: 'succeeded',
        created_at: '2023-09-08T16:19:34.765994Z',
        source: 'api',
        data_removed: false,
        started_at: '2023-09-08T16:19:34.779176Z',
        completed_at: '2023-09-08T16:19:34.791859Z',
        metrics: { predict_time: 0.012683 },
        urls: {
          web: 'https://replicate.com/p/gm3qorzdhgbfurvjtvhg6dckhu',
          get: 'https://api.replicate.com/v1/predictions/gm3qorzdhgbfurvjtvhg6dckhu',
          cancel: 'https://api.replicate.com/v1/predictions/gm3qorzdhgbfurvjtvhg6dckhu/cancel',
        },
      },
    ],
    // Replicate's recorded 401 (replicate-python tests/cassettes/run__invalid-token.yaml)
    [replicateGet, 401, 'application/problem+json', { title: 'Unauthenticated', detail: 'You did not pass a valid authentication token', status: 401 }],
    // OpenAI's ImagesResponse example
    [
      { provider: 'openai', method: 'POST', path: '/images/generations' },
      200,
      'application/json',
      {
        created: 1713833628,
        data: [{ b64_json: '...' }],
        background: 'transparent',
        output_format: 'png',
        size: '1024x1024',
        quality: 'high',
        usage: { total_tokens: 100, input_tokens: 50, output_tokens: 50, input_tokens_details: { text_tokens: 10, image_tokens: 40 } },
      },
    ],
    // fal's request error example (docs: model-apis/request-errors)
    [falResult, 504, 'application/json', { detail: 'Request timed out', error_type: 'request_timeout' }],
    // fal's submit example (docs: model-endpoints/queue)
    [
      { provider: 'fal', method: 'POST', path: '/fal-ai/fast-sdxl' },
      200,
      'application/json',
      {
        request_id: '80e732af-660e-45cd-bd63-580e4f2a94cc',
        response_url: 'https://queue.fal.run/fal-ai/fast-sdxl/requests/80e732af-660e-45cd-bd63-580e4f2a94cc',
        status_url: 'https://queue.fal.run/fal-ai/fast-sdxl/requests/80e732af-660e-45cd-bd63-580e4f2a94cc/status',
        cancel_url: 'https://queue.fal.run/fal-ai/fast-sdxl/requests/80e732af-660e-45cd-bd63-580e4f2a94cc/cancel',
      },
    ],
  ] as const)('%o %d', (exchange, status, contentType, body) => {
    expect(contracts.checkResponse(exchange, status, contentType, json(body))).toEqual([]);
  });
});

describe('answers the providers would not send are caught', () => {
  it.each([
    // what the fakes answered before they were checked: each was accepted by our adapters
    [
      'a Replicate prediction without model, version, data_removed, created_at or urls',
      replicateGet,
      200,
      { id: 'job1', status: 'processing', output: null, error: null },
      /required property 'urls'/,
    ],
    ['a Replicate error that is not a problem', replicateGet, 404, { message: 'Not found' }, /required property 'detail'/],
    [
      'an OpenAI error without type, param and code',
      { provider: 'openai', method: 'POST', path: '/audio/speech' },
      401,
      { error: { message: 'Incorrect API key' } },
      /required property 'type'/,
    ],
    [
      'OpenAI usage with total_tokens only',
      { provider: 'openai', method: 'POST', path: '/images/generations' },
      200,
      { created: 1, data: [], usage: { total_tokens: 100 } },
      /\/usage must have required property 'input_tokens'/,
    ],
    [
      'a fal flux result without has_nsfw_concepts',
      falResult,
      200,
      { images: [{ url: 'https://x/y.png' }], seed: 1, prompt: 'p', timings: {} },
      /has_nsfw_concepts/,
    ],
    [
      'a fal status without its URLs',
      { provider: 'fal', method: 'GET', path: '/fal-ai/flux/requests/r1/status' },
      200,
      { status: 'COMPLETED' },
      /required property 'request_id'/,
    ],
    [
      'a fal cancel with a status fal does not document',
      { provider: 'fal', method: 'PUT', path: '/fal-ai/flux/requests/r1/cancel' },
      202,
      { status: 'CANCELLED' },
      /allowed values/,
    ],
    ['a fal error type fal does not document', falResult, 500, { detail: 'x', error_type: 'gpu_on_fire' }, /fal\/error\.json/],
  ] as const)('%s', (_name, exchange, status, body, problem) => {
    const problems = contracts.checkResponse(exchange, status, 'application/json', json(body));
    expect(problems.join('\n')).toMatch(problem);
  });

  it('an answer that is not JSON where the provider sends JSON, and an operation no contract covers', () => {
    expect(contracts.checkResponse(replicateGet, 200, 'text/html', '<html></html>')).toEqual([expect.stringMatching(/Content-Type text\/html/)]);
    expect(contracts.checkResponse({ provider: 'replicate', method: 'DELETE', path: '/predictions/x' }, 200, 'application/json', '{}')).toEqual([
      expect.stringMatching(/no provider contract covers/),
    ]);
  });
});

describe('requests our adapters must not send', () => {
  it.each([
    [
      'speech over 4,096 characters',
      { provider: 'openai', method: 'POST', path: '/audio/speech' },
      { model: 'gpt-4o-mini-tts', input: 'x'.repeat(4_097), voice: 'coral' },
      /\/input must NOT have more than 4096/,
    ],
    [
      'a Replicate create with a field beside input',
      { provider: 'replicate', method: 'POST', path: '/models/black-forest-labs/flux-schnell/predictions' },
      { input: { prompt: 'p' }, quality: 'hd' },
      /additional properties/,
    ],
    [
      'a flux-schnell aspect ratio cog-flux does not offer',
      { provider: 'replicate', method: 'POST', path: '/models/black-forest-labs/flux-schnell/predictions' },
      { input: { prompt: 'p', aspect_ratio: '7:3' } },
      /\/input\/aspect_ratio/,
    ],
    [
      'a kling duration fal does not offer',
      { provider: 'fal', method: 'POST', path: '/fal-ai/kling-video/v1/standard/text-to-video' },
      { prompt: 'p', duration: 10 },
      /\/duration/,
    ],
    [
      'a fal model without a contract',
      { provider: 'fal', method: 'POST', path: '/fal-ai/unknown-model' },
      { prompt: 'p' },
      /no schema fal\/models\/fal-ai-unknown-model\.input\.json/,
    ],
  ] as const)('%s', (_name, exchange, body, problem) => {
    expect(contracts.checkRequest(exchange, body).join('\n')).toMatch(problem);
  });
});

describe('the fake providers', () => {
  it('an answer of theirs that breaks the schema fails the test that used them, at stop()', async () => {
    const fake = await startFakeProviders();
    const res = await fetch(`${fake.env.REPLICATE_BASE_URL}/models/black-forest-labs/flux-schnell/predictions`, {
      method: 'POST',
      headers: { Authorization: 'Bearer test-replicate', 'Content-Type': 'application/json' },
      body: JSON.stringify({ input: { prompt: 'broken answer [malformed]' } }),
    });
    expect(res.status).toBe(201);
    expect(fake.violations.join('\n')).toMatch(
      /replicate POST \/models\/black-forest-labs\/flux-schnell\/predictions answer 201 breaks replicate\/prediction\.response\.json/,
    );
    await expect(fake.stop()).rejects.toThrow(/provider contract violation/);
  });

  it('a request that breaks the schema is refused as the real API refuses it, and fails the test as well', async () => {
    const fake = await startFakeProviders();
    const res = await fetch(`${fake.env.OPENAI_BASE_URL}/audio/speech`, {
      method: 'POST',
      headers: { Authorization: 'Bearer test-openai', 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini-tts', input: 'x'.repeat(5_000), voice: 'coral', response_format: 'wav' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', param: null, code: null } });
    await expect(fake.stop()).rejects.toThrow(/\/input must NOT have more than 4096 characters/);
  });

  it('well-formed exchanges leave no violation', async () => {
    const fake = await startFakeProviders();
    const res = await fetch(`${fake.env.FAL_QUEUE_URL}/fal-ai/flux/schnell`, {
      method: 'POST',
      headers: { Authorization: 'Key test-fal', 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'fine', num_images: 1, image_size: { width: 1024, height: 1024 }, output_format: 'png' }),
    });
    const submitted = (await res.json()) as { status_url: string; response_url: string };
    for (const url of [submitted.status_url, submitted.status_url, submitted.response_url]) {
      await (await fetch(url, { headers: { Authorization: 'Key test-fal' } })).arrayBuffer();
    }
    expect(fake.violations).toEqual([]);
    await fake.stop();
  });
});
