import { ConfigError, DEFAULTS, loadConfig, type Env } from '@tes/config';

/** The ConfigError `env` produces; fails the test when the config loads. */
function problemsOf(env: Env): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError, the config loaded');
}

describe('loadConfig', () => {
  it('serves on local defaults with an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      nodeEnv: 'development',
      port: 8080,
      metricsPort: 9464,
      databaseUrl: DEFAULTS.DATABASE_URL,
      amqpUrl: DEFAULTS.AMQP_URL,
      amqpPrefix: '',
      workerQueues: ['image', 'audio', 'video', 'test'],
      enableTestTools: false,
      rateLimitPerMinute: 120,
      logLevel: 'info',
      presignTtlSeconds: 300,
    });
    expect(c.s3).toEqual({
      endpoint: DEFAULTS.S3_ENDPOINT,
      publicEndpoint: DEFAULTS.S3_ENDPOINT,
      bucket: DEFAULTS.S3_BUCKET,
      region: DEFAULTS.S3_REGION,
      accessKeyId: DEFAULTS.S3_ACCESS_KEY_ID,
      secretAccessKey: DEFAULTS.S3_SECRET_ACCESS_KEY,
      connectTimeoutMs: 3_000,
      requestTimeoutMs: 60_000,
    });
    expect(c.dbTimeouts).toEqual({ statementTimeoutMs: null, lockTimeoutMs: null, idleInTransactionTimeoutMs: null });
    expect(c.providers).toEqual({ replicateApiToken: undefined, openaiApiKey: undefined, falKey: undefined });
  });

  it('an empty string counts as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '', LOG_LEVEL: '', OPENAI_API_KEY: '' })).toMatchObject({
      port: 8080,
      databaseUrl: DEFAULTS.DATABASE_URL,
      logLevel: 'info',
      providers: { openaiApiKey: undefined },
    });
  });

  it('reads set variables into typed fields', () => {
    const c = loadConfig({
      PORT: '3000',
      DATABASE_URL: 'postgresql://u@db:5432/x',
      S3_ENDPOINT: 'http://minio:9000',
      S3_PUBLIC_ENDPOINT: 'https://files.example.com',
      ENABLE_TEST_TOOLS: 'true',
      RATE_LIMIT_PER_MINUTE: '100000',
      LOG_LEVEL: 'debug',
      PRESIGN_TTL_SECONDS: '60',
      FAL_KEY: 'fal-123',
    });
    expect(c).toMatchObject({ port: 3000, databaseUrl: 'postgresql://u@db:5432/x', enableTestTools: true, rateLimitPerMinute: 100_000 });
    expect(c).toMatchObject({ logLevel: 'debug', presignTtlSeconds: 60, providers: { falKey: 'fal-123' } });
    expect(c.s3.endpoint).toBe('http://minio:9000');
    expect(c.s3.publicEndpoint).toBe('https://files.example.com');
    expect(loadConfig({ ENABLE_TEST_TOOLS: '0' }).enableTestTools).toBe(false);
    expect(loadConfig({ ENABLE_TEST_TOOLS: '1' }).enableTestTools).toBe(true);
  });

  it('lists every bad variable in one ConfigError', () => {
    const problems = problemsOf({ PORT: 'abc', DATABASE_URL: 'http://x', LOG_LEVEL: 'loud' });
    expect(problems).toHaveLength(3);
    expect(problems.find((p) => p.startsWith('PORT'))).toMatch(/whole number.*"abc"/);
    expect(problems.find((p) => p.startsWith('DATABASE_URL'))).toMatch(/postgres/);
    expect(problems.find((p) => p.startsWith('LOG_LEVEL'))).toMatch(/loud/);
    try {
      loadConfig({ PORT: 'abc', DATABASE_URL: 'http://x', LOG_LEVEL: 'loud' });
    } catch (err) {
      // the message an operator reads names all three
      for (const name of ['PORT', 'DATABASE_URL', 'LOG_LEVEL']) expect((err as Error).message).toContain(`- ${name} `);
    }
  });

  it.each([
    ['PORT', '-1'],
    ['PORT', '65536'],
    ['PORT', '80.5'],
    ['METRICS_PORT', '1e3'],
    ['AMQP_URL', 'http://rabbit'],
    ['AMQP_URL', 'not a url'],
    ['S3_ENDPOINT', 'ftp://s3'],
    ['S3_PUBLIC_ENDPOINT', 'file:///tmp'],
    ['ENABLE_TEST_TOOLS', 'maybe'],
    ['RATE_LIMIT_PER_MINUTE', '0'],
    ['WORKER_CONCURRENCY', '0'],
    ['AMQP_PREFIX', 'has space'],
    ['PRESIGN_TTL_SECONDS', '301'],
    ['PRESIGN_TTL_SECONDS', '3600'],
    ['PRESIGN_TTL_SECONDS', '0'],
  ])('rejects %s=%s', (name, value) => {
    const problems = problemsOf({ [name]: value });
    expect(problems[0]).toMatch(new RegExp(`^${name} `));
    // only the variable itself, or one that defaults to it (S3_PUBLIC_ENDPOINT <- S3_ENDPOINT)
    for (const p of problems) expect(p).toMatch(new RegExp(`^(${name}|S3_PUBLIC_ENDPOINT) `));
  });

  it('takes PROJECT_SLOT_SHARE as a share above 0 and at most 1, 0.5 by default', () => {
    expect(loadConfig({}).projectSlotShare).toBe(0.5);
    expect(loadConfig({ PROJECT_SLOT_SHARE: '0.25' }).projectSlotShare).toBe(0.25);
    expect(loadConfig({ PROJECT_SLOT_SHARE: '1' }).projectSlotShare).toBe(1);
    for (const bad of ['0', '1.5', '-0.5', 'half']) expect(problemsOf({ PROJECT_SLOT_SHARE: bad })).toEqual([expect.stringMatching(/^PROJECT_SLOT_SHARE /)]);
  });

  it('accepts the presign TTL bound itself', () => {
    expect(loadConfig({ PRESIGN_TTL_SECONDS: '300' }).presignTtlSeconds).toBe(300);
    expect(loadConfig({ PRESIGN_TTL_SECONDS: '1' }).presignTtlSeconds).toBe(1);
  });

  it('takes a per-category concurrency in WORKER_QUEUES (image:4,video:1)', () => {
    const c = loadConfig({ WORKER_QUEUES: 'image:4, video:1,audio', WORKER_CONCURRENCY: '3' });
    expect(c.workerQueues).toEqual(['image', 'video', 'audio']);
    expect(c.workerConcurrencyByQueue).toEqual({ image: 4, video: 1 });
    expect(c.workerConcurrency).toBe(3);
    expect(problemsOf({ WORKER_QUEUES: 'video:0' })).toEqual([expect.stringContaining('concurrency of "video"')]);
    expect(problemsOf({ WORKER_QUEUES: 'video:x' })).toEqual([expect.stringContaining('concurrency of "video"')]);
  });

  it('parses WORKER_QUEUES as a trimmed, comma-separated list of categories', () => {
    expect(loadConfig({ WORKER_QUEUES: 'image' }).workerQueues).toEqual(['image']);
    expect(loadConfig({ WORKER_QUEUES: ' image , test,,audio ' }).workerQueues).toEqual(['image', 'test', 'audio']);
    expect(loadConfig({ WORKER_QUEUES: 'video-hd,a1' }).workerQueues).toEqual(['video-hd', 'a1']);
    expect(problemsOf({ WORKER_QUEUES: 'image,Audio' })).toEqual([expect.stringContaining('"Audio"')]);
    expect(problemsOf({ WORKER_QUEUES: 'image,au dio,1x' })).toHaveLength(2);
  });

  it('takes the nodes of a RabbitMQ cluster in AMQP_URL, comma-separated, and checks each', () => {
    const list = ' amqp://u:p@rabbit-0:5672 , amqps://u:p,w@rabbit-1:5671,amqp://u:p@rabbit-2 ';
    // trimmed, in order; a comma inside a password stays (the list splits only before a scheme://)
    expect(loadConfig({ AMQP_URL: list }).amqpUrl).toBe('amqp://u:p@rabbit-0:5672,amqps://u:p,w@rabbit-1:5671,amqp://u:p@rabbit-2');
    expect(problemsOf({ AMQP_URL: 'amqp://rabbit-0,http://rabbit-1' })).toEqual(['AMQP_URL (URL 2 of 2) must use amqp: or amqps:, got http:']);
    expect(problemsOf({ AMQP_URL: ',' })).toEqual(['AMQP_URL is not a URL']);
  });

  it('reads the retention horizons in their units, with a default for each, and refuses a usage horizon below two months', () => {
    const HOUR = 3_600_000;
    expect(loadConfig({}).retention).toEqual({
      intervalMs: 60_000,
      batchSize: 500,
      outboxMs: 24 * HOUR,
      webhookDeliveriesMs: 7 * 24 * HOUR,
      rateLimitsMs: HOUR,
      usageMonths: 13,
    });
    expect(
      loadConfig({
        RETENTION_INTERVAL_MS: '5000',
        RETENTION_BATCH_SIZE: '100',
        OUTBOX_RETENTION_HOURS: '2',
        WEBHOOK_DELIVERY_RETENTION_DAYS: '30',
        RATE_LIMIT_RETENTION_MINUTES: '5',
        USAGE_RETENTION_MONTHS: '25',
      }).retention,
    ).toEqual({ intervalMs: 5_000, batchSize: 100, outboxMs: 2 * HOUR, webhookDeliveriesMs: 30 * 24 * HOUR, rateLimitsMs: 5 * 60_000, usageMonths: 25 });
    expect(problemsOf({ USAGE_RETENTION_MONTHS: '1', OUTBOX_RETENTION_HOURS: '0', RETENTION_BATCH_SIZE: '0' })).toEqual([
      'RETENTION_BATCH_SIZE must be between 1 and 10000, got 0',
      'OUTBOX_RETENTION_HOURS must be between 1 and 8760, got 0',
      'USAGE_RETENTION_MONTHS must be between 2 and 1200, got 1',
    ]);
    expect(Object.isFrozen(loadConfig({}).retention)).toBe(true);
  });

  it('reads the shares of upload slots and held connections, and refuses an organization share above half the process', () => {
    const c = loadConfig({});
    expect(c.uploadSlotTurnMs).toBe(60_000);
    expect(c.heldConnections).toEqual({ perProcess: 2_000, perOrganization: 400, perProject: 200 });
    expect(
      loadConfig({ HELD_CONNECTIONS_PER_PROCESS: '8', HELD_CONNECTIONS_PER_ORGANIZATION: '4', HELD_CONNECTIONS_PER_PROJECT: '4' }).heldConnections,
    ).toEqual({
      perProcess: 8,
      perOrganization: 4,
      perProject: 4,
    });
    expect(problemsOf({ HELD_CONNECTIONS_PER_PROCESS: '8', HELD_CONNECTIONS_PER_ORGANIZATION: '5', HELD_CONNECTIONS_PER_PROJECT: '4' })).toEqual([
      expect.stringContaining('must be at most half of HELD_CONNECTIONS_PER_PROCESS'),
    ]);
    expect(problemsOf({ HELD_CONNECTIONS_PER_PROJECT: '401' })).toEqual([expect.stringContaining('must not exceed HELD_CONNECTIONS_PER_ORGANIZATION')]);
    expect(problemsOf({ UPLOAD_SLOT_TURN_MS: '10' })).toEqual([expect.stringContaining('UPLOAD_SLOT_TURN_MS must be between 500')]);
  });

  it('returns a deeply frozen object', () => {
    const c = loadConfig({});
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.s3)).toBe(true);
    expect(Object.isFrozen(c.workerQueues)).toBe(true);
    expect(Object.isFrozen(c.providers)).toBe(true);
    // test files are ES modules in strict mode: writing to a frozen object throws
    expect(() => {
      (c as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => (c.workerQueues as string[]).push('x')).toThrow(TypeError);
    expect(c.port).toBe(8080);
  });

  it('does not read process.env when given an env', () => {
    const saved = process.env.PORT;
    process.env.PORT = 'not-a-port';
    try {
      expect(loadConfig({}).port).toBe(8080);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });
});

describe('MODEL_RETIREMENTS', () => {
  it('reads tool:model=YYYY-MM-DD pairs; none by default; a malformed entry is a problem', () => {
    expect(loadConfig({}).modelRetirements).toEqual({});
    expect(
      loadConfig({ MODEL_RETIREMENTS: 'audio.speech:openai/gpt-4o-mini-tts=2027-01-06, image.generate:fal/flux-schnell=2028-02-01' }).modelRetirements,
    ).toEqual({
      'audio.speech:openai/gpt-4o-mini-tts': '2027-01-06',
      'image.generate:fal/flux-schnell': '2028-02-01',
    });
    expect(problemsOf({ MODEL_RETIREMENTS: 'audio.speech:openai/gpt-4o-mini-tts=6 Jan 2027' })).toEqual([
      'MODEL_RETIREMENTS: "audio.speech:openai/gpt-4o-mini-tts=6 Jan 2027" is not tool:model=YYYY-MM-DD',
    ]);
  });
});
