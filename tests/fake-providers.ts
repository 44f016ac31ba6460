import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { ProviderContracts, type ProviderExchange } from '@tes/testing';
import { invalidRequest, providerError, type ErrorAnswer, type FakeProvider } from './fake-provider-errors';
import { ffmpegMake } from './media';

/**
 * One loopback HTTP server speaking the documented protocols of Replicate (predictions),
 * fal (queue) and OpenAI (images), for adapter tests. Behaviour is steered by tags in the
 * prompt:
 *   [polls:N]  job is processing for N polls, then succeeds     [never]  always processing
 *   [fail]     job fails                                        [reject] create answers 422
 *   [429once]  first create answers 429, then works             [500]    create answers 500
 *   [hang]     create reads the request, then drops the connection
 *   [badfile]  the output file is not an image or video         [empty]  the job succeeds with no output files
 *   [malformed] the create answer breaks the provider's schema (to prove the check catches it)
 *   [usage:N]  OpenAI images report N output tokens instead of what the quality and size make
 * and outages of a job's reads, from the first such request for MS milliseconds (or forever):
 *   [status-CODE:MS]  status polls answer HTTP CODE      [status-drop:MS]  ... drop the connection
 *   [result-CODE:MS]  fal's result URL, the same         [result-drop:MS]
 *   [file-CODE:MS]    the output files, the same         [file-drop:MS]
 * An outage's answers come from in front of the provider (a proxy's HTML page): they carry
 * none of the provider's error shapes, and fal's none of its X-Fal-Error-Type.
 *
 * Contracts: every request from our adapters and every answer of the fake is checked against
 * the provider's schema (tests/provider-contracts). A request that breaks it is refused as
 * the real API refuses one; every violation, ours or the fake's, is kept in `violations`,
 * and `stop()` throws when there is any, so no test passes against a dialect the real
 * providers do not speak.
 *
 * The model endpoints `admin models check` reads answer from `models` (a test may change it):
 * OpenAI GET /models/{id} (its Model object: shutdown_date), Replicate GET
 * /models/{owner}/{name}, fal's platform API GET /models?endpoint_id= (metadata.status).
 *
 * Behaviours of the real APIs (issue #28):
 *   [throttle:MS:S]   creates answer 429 with Retry-After: S (seconds) for MS ms from the first
 *                     one (Replicate's "Request was throttled ... resets in ~Ss")
 *   [queued]          fal: the request never leaves the queue (a cancel answers OK: removed)
 *   [ignores-cancel]  fal: a running model keeps running after CANCELLATION_REQUESTED
 *   [finishes-after-cancel]  fal: a running model delivers its result after the cancel
 *   [nsfw:I,J|all]    fal flux: has_nsfw_concepts flags images I, J (0-based) or all of them
 * A fal model that honours a cancel (the default) ends COMPLETED, its result an error. Replicate
 * cancels a prediction still running past its Cancel-After header (status canceled).
 */
export interface FakeModelStates {
  /** OpenAI model id -> its shutdown_date (null: none announced); absent: 404. */
  openai: Record<string, string | null>;
  /** Replicate "owner/name" models that exist. */
  replicate: string[];
  /** fal endpoint id -> its status; absent: no such endpoint. */
  fal: Record<string, 'active' | 'deprecated'>;
}
export interface RecordedRequest {
  /** When it arrived (ms since the epoch). */
  at: number;
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
  /** The request's headers (names lower-case). */
  headers: http.IncomingHttpHeaders;
}

export interface FakeProviders {
  url: string;
  env: Record<string, string>;
  requests: RecordedRequest[];
  /** Requests and answers that broke a provider schema, as readable lines. */
  violations: string[];
  creates(provider: 'replicate' | 'fal' | 'openai'): RecordedRequest[];
  models: FakeModelStates;
  /** Closes the server; throws when any request or answer broke a provider schema. */
  stop(): Promise<void>;
}

type ReadPoint = 'status' | 'result' | 'file' | 'cancel';

interface Job {
  id: string;
  prompt: string;
  polls: number;
  count: number;
  kind: 'image' | 'video';
  /** The model it was created for: Replicate's owner/name, fal's endpoint id. */
  model: string;
  input: Record<string, unknown>;
  createdAt: string;
  /** When each read point's outage began (its first request). */
  outageFrom: Partial<Record<ReadPoint, number>>;
  /** Cancelled by the client: it reports so and bills no further. */
  cancelled?: boolean;
  /** Finished as the cancel arrived ([completes-on-cancel]): the cancel is too late. */
  completedLate?: boolean;
  /** fal: CANCELLATION_REQUESTED was answered while the model ran (it decides what to do). */
  cancelRequested?: boolean;
  /** Replicate: the Cancel-After deadline (ms since the epoch) the create carried. */
  cancelAt?: number;
}

/** The provider and the path after its base URL, for a request to the fake. */
function exchangeOf(method: string, path: string): ProviderExchange | null {
  const m = /^\/(openai|replicate)\/v1(\/.*)$/.exec(path) ?? /^\/(fal)(\/.*)$/.exec(path);
  return m ? { provider: m[1] as FakeProvider, method, path: m[2]! } : null;
}

export async function startFakeProviders(): Promise<FakeProviders> {
  const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3366cc' } })
    .png()
    .toBuffer();
  const mp4 = await ffmpegMake(['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=5', '-c:v', 'libx264', '-pix_fmt', 'yuv420p'], 'g.mp4');
  const wav = await ffmpegMake(['-f', 'lavfi', '-i', 'sine=frequency=300:duration=1.5', '-ac', '1', '-ar', '24000'], 's.wav');
  const contracts = new ProviderContracts();
  const models: FakeModelStates = {
    openai: { 'gpt-image-1.5': null, 'gpt-image-1': '2026-10-23', 'gpt-4o-mini-tts': null },
    replicate: ['black-forest-labs/flux-schnell', 'kwaivgi/kling-v1.6-standard'],
    fal: { 'fal-ai/flux/schnell': 'active', 'fal-ai/kling-video/v1/standard/text-to-video': 'active' },
  };
  const jobs = new Map<string, Job>();
  const requests: RecordedRequest[] = [];
  const violations: string[] = [];
  /** The provider operation each answer belongs to, for checking it as it is sent. */
  const exchanges = new WeakMap<http.ServerResponse, ProviderExchange>();
  const seen429 = new Set<string>();
  /** When each [throttle:…] prompt's first create arrived. */
  const throttledFrom = new Map<string, number>();
  let seq = 0;
  let base = '';

  const tag = (prompt: string, t: string) => prompt.includes(`[${t}]`);
  const pollsNeeded = (prompt: string) => Number(/\[polls:(\d+)\]/.exec(prompt)?.[1] ?? 1);
  const fileUrl = (job: Job, i: number) =>
    `${base}/files/${job.id}/` + (tag(job.prompt, 'badfile') ? 'bad.bin' : job.kind === 'video' ? 'video.mp4' : `img-${i}.png`);

  /** Sends a provider's answer, checked against its schema first. */
  function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const all = { 'Content-Type': 'application/json', ...headers };
    const raw = Buffer.from(JSON.stringify(body));
    const exchange = exchanges.get(res);
    if (exchange) violations.push(...contracts.checkResponse(exchange, status, all['Content-Type'], raw));
    res.writeHead(status, all);
    res.end(raw);
  }

  function sendError(res: http.ServerResponse, e: ErrorAnswer): void {
    send(res, e.status, e.body, e.headers);
  }

  /** Answers for the job's outage at `point` if one is on; true when it did. */
  function outage(job: Job, point: ReadPoint, req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const m = new RegExp(`\\[${point}-(\\d{3}|drop):(\\d+|forever)\\]`).exec(job.prompt);
    if (!m) return false;
    const from = (job.outageFrom[point] ??= Date.now());
    if (m[2] !== 'forever' && Date.now() - from >= Number(m[2])) return false;
    if (m[1] === 'drop') req.socket.destroy();
    else {
      // a proxy's page, not the provider's answer: not checked against its schema
      res.writeHead(Number(m[1]), { 'Content-Type': 'text/html' });
      res.end(`<html><body><h1>${m[1]}</h1>upstream unavailable</body></html>`);
    }
    return true;
  }

  /** Shared create behaviour; returns the job, or null when the response was already sent. */
  function create(
    provider: FakeProvider,
    res: http.ServerResponse,
    req: http.IncomingMessage,
    prompt: string,
    count: number,
    kind: Job['kind'],
    model: string,
    input: Record<string, unknown>,
  ): Job | null {
    if (tag(prompt, 'hang')) {
      req.socket.destroy();
      return null;
    }
    if (tag(prompt, '500')) return (sendError(res, providerError(provider, 500, undefined, { errorType: 'internal_error' })), null);
    if (tag(prompt, 'reject')) {
      const refusal =
        provider === 'openai'
          ? providerError('openai', 400, 'Your request was rejected as a result of our safety system.')
          : providerError(provider, 422, 'the prompt was flagged', { loc: ['body', 'prompt'], type: 'content_policy_violation' });
      return (sendError(res, refusal), null);
    }
    if (tag(prompt, '429once') && !seen429.has(prompt)) {
      seen429.add(prompt);
      const e = providerError(provider, 429, provider === 'replicate' ? 'Request was throttled. Your rate limit resets in ~1s.' : undefined);
      return (sendError(res, { ...e, headers: { ...e.headers, 'Retry-After': '0' } }), null);
    }
    const throttle = /\[throttle:(\d+):(\d+)\]/.exec(prompt);
    if (throttle) {
      const from = throttledFrom.get(prompt) ?? Date.now();
      throttledFrom.set(prompt, from);
      if (Date.now() - from < Number(throttle[1])) {
        // Replicate's answer (replicate-javascript lib/util.js honours its Retry-After)
        const e = providerError(provider, 429, provider === 'replicate' ? `Request was throttled. Your rate limit resets in ~${throttle[2]}s.` : undefined);
        return (sendError(res, { ...e, headers: { ...e.headers, 'Retry-After': throttle[2]! } }), null);
      }
    }
    const id = `job${++seq}`;
    const job: Job = {
      id,
      prompt,
      polls: 0,
      count: tag(prompt, 'empty') ? 0 : count,
      kind,
      model,
      input,
      createdAt: new Date().toISOString(),
      outageFrom: {},
    };
    jobs.set(id, job);
    const cancelAfter = /^(\d+)s$/.exec(String(req.headers['cancel-after'] ?? ''));
    if (cancelAfter) job.cancelAt = Date.now() + Number(cancelAfter[1]) * 1000;
    return job;
  }

  /** fal: the model stopped on a cancel it was sent while running: its result is an error. */
  const stoppedByCancel = (job: Job) => job.cancelRequested === true && !tag(job.prompt, 'finishes-after-cancel') && !tag(job.prompt, 'ignores-cancel');
  /** fal flux: whether its safety checker flags image `i` ([nsfw:0,2] or [nsfw:all]). */
  const flagged = (job: Job, i: number) => {
    const m = /\[nsfw:([\d,]+|all)\]/.exec(job.prompt);
    return m ? m[1] === 'all' || m[1]!.split(',').map(Number).includes(i) : false;
  };

  /** Advances a job by one poll: 'running' | 'done' | 'failed'. */
  function step(job: Job): 'running' | 'done' | 'failed' | 'cancelled' {
    job.polls++;
    if (job.cancelAt !== undefined && Date.now() >= job.cancelAt) job.cancelled = true;
    if (job.cancelled) return 'cancelled';
    if (job.completedLate) return 'done';
    if (job.cancelRequested) return tag(job.prompt, 'finishes-after-cancel') ? 'done' : tag(job.prompt, 'ignores-cancel') ? 'running' : 'failed';
    if (tag(job.prompt, 'fail')) return 'failed';
    if (tag(job.prompt, 'never') || tag(job.prompt, 'queued')) return 'running';
    return job.polls > pollsNeeded(job.prompt) ? 'done' : 'running';
  }

  /** A Replicate prediction object, every field its schema requires. */
  function prediction(job: Job, status: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
    const url = `${base}/replicate/v1/predictions/${job.id}`;
    const done = ['succeeded', 'failed', 'canceled'].includes(status);
    return {
      id: job.id,
      model: job.model,
      version: 'hidden',
      input: job.input,
      logs: '',
      output: null,
      data_removed: false,
      error: null,
      status,
      source: 'api',
      created_at: job.createdAt,
      ...(done ? { completed_at: new Date().toISOString(), metrics: { predict_time: 1.2, total_time: 1.5 } } : {}),
      urls: { web: `https://replicate.com/p/${job.id}`, get: url, cancel: `${url}/cancel` },
      ...fields,
    };
  }

  /** The URLs of a fal request, as its queue answers carry them. */
  function falUrls(job: Job): Record<string, string> {
    const at = `${base}/fal/${job.model.split('/').slice(0, 2).join('/')}/requests/${job.id}`;
    return { request_id: job.id, response_url: at, status_url: `${at}/status`, cancel_url: `${at}/cancel` };
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
      const [path, query] = (req.url ?? '').split('?') as [string, string | undefined];
      requests.push({ at: Date.now(), method: req.method ?? '', path, authorization: req.headers.authorization, body, headers: req.headers });
      if (req.method === 'GET' && modelRoute(req, res, path, new URLSearchParams(query ?? ''))) return;
      const exchange = exchangeOf(req.method ?? '', path);
      if (exchange) {
        exchanges.set(res, exchange);
        const problems = contracts.checkRequest(exchange, body);
        // an operation no contract covers is recorded, and answered as the fake can (404)
        if (problems.length > 0 && contracts.covers(exchange)) {
          violations.push(...problems);
          return sendError(res, invalidRequest(exchange.provider, problems));
        }
        violations.push(...problems);
      }
      route(req, res, path, body);
    });
  });

  /** The model endpoints (shapes: openai-node's Model, Replicate's model object, fal's platform API model search). */
  function modelRoute(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): boolean {
    let m: RegExpExecArray | null;
    if ((m = /^\/openai\/v1\/models\/([^/]+)$/.exec(path))) {
      if (req.headers.authorization !== 'Bearer test-openai')
        return (send(res, 401, { error: { message: 'Incorrect API key', type: 'invalid_request_error' } }), true);
      const id = decodeURIComponent(m[1]!);
      if (!(id in models.openai)) {
        const error = { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' };
        return (send(res, 404, { error }), true);
      }
      return (send(res, 200, { id, object: 'model', created: 1_700_000_000, owned_by: 'openai', shutdown_date: models.openai[id] }), true);
    }
    if ((m = /^\/replicate\/v1\/models\/([^/]+)\/([^/]+)$/.exec(path))) {
      if (req.headers.authorization !== 'Bearer test-replicate') return (send(res, 401, { detail: 'Unauthenticated' }), true);
      const [owner, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
      if (!models.replicate.includes(`${owner}/${name}`)) return (send(res, 404, { detail: 'Not found.' }), true);
      const model = { url: `https://replicate.com/${owner}/${name}`, owner, name, description: null, visibility: 'public', run_count: 1 };
      return (
        send(res, 200, { ...model, github_url: null, paper_url: null, license_url: null, cover_image_url: null, default_example: null, latest_version: null }),
        true
      );
    }
    if (path === '/falapi/v1/models') {
      if (req.headers.authorization !== 'Key test-fal') return (send(res, 401, { detail: 'Unauthorized' }), true);
      const id = query.get('endpoint_id') ?? '';
      const status = models.fal[id];
      const found = status ? [{ endpoint_id: id, metadata: { display_name: id, category: 'text-to-image', status } }] : [];
      return (send(res, 200, { models: found, next_cursor: null, has_more: false }), true);
    }
    return false;
  }

  function route(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: Record<string, unknown> | undefined): void {
    let m: RegExpExecArray | null;
    if ((m = /^\/files\/([^/]+)\/[^/]+$/.exec(path))) {
      const job = jobs.get(m[1]!);
      if (!job) return void res.writeHead(404).end();
      if (outage(job, 'file', req, res)) return;
      if (path.endsWith('/bad.bin')) return void res.end('<html>not a file</html>');
      res.setHeader('Content-Type', path.endsWith('.mp4') ? 'video/mp4' : 'image/png');
      return void res.end(path.endsWith('.mp4') ? mp4 : png);
    }
    // Replicate
    if (path.startsWith('/replicate/')) {
      if (req.headers.authorization !== 'Bearer test-replicate')
        return sendError(res, providerError('replicate', 401, 'You did not pass a valid authentication token'));
      if (req.method === 'POST' && (m = /^\/replicate\/v1\/models\/([^/]+)\/([^/]+)\/predictions$/.exec(path))) {
        const input = (body?.input ?? {}) as Record<string, unknown>;
        const kind = m[1] === 'kwaivgi' ? 'video' : 'image';
        const job = create('replicate', res, req, String(input.prompt), Number(input.num_outputs ?? 1), kind, `${m[1]}/${m[2]}`, input);
        if (job) send(res, 201, tag(job.prompt, 'malformed') ? { id: job.id, status: 'starting' } : prediction(job, 'starting'));
        return;
      }
      if (req.method === 'GET' && (m = /^\/replicate\/v1\/predictions\/([^/]+)$/.exec(path))) {
        const job = jobs.get(m[1]!);
        if (!job) return sendError(res, providerError('replicate', 404));
        if (outage(job, 'status', req, res)) return;
        const s = step(job);
        if (s === 'running') return send(res, 200, prediction(job, 'processing', { started_at: job.createdAt }));
        if (s === 'failed') return send(res, 200, prediction(job, 'failed', { error: 'CUDA out of memory' }));
        if (s === 'cancelled') return send(res, 200, prediction(job, 'canceled'));
        const urls = Array.from({ length: job.count }, (_, i) => fileUrl(job, i));
        return send(res, 200, prediction(job, 'succeeded', { output: job.kind === 'video' ? urls[0] : urls }));
      }
      // cancel (POST /predictions/{id}/cancel answers the prediction)
      if (req.method === 'POST' && (m = /^\/replicate\/v1\/predictions\/([^/]+)\/cancel$/.exec(path))) {
        const job = jobs.get(m[1]!);
        if (!job) return sendError(res, providerError('replicate', 404));
        if (outage(job, 'cancel', req, res)) return;
        if (tag(job.prompt, 'completes-on-cancel')) job.completedLate = true;
        else job.cancelled = true;
        return send(res, 200, prediction(job, job.completedLate ? 'succeeded' : 'canceled'));
      }
    }
    // fal
    if (path.startsWith('/fal/') && req.headers.authorization !== 'Key test-fal') return sendError(res, providerError('fal', 401));
    if (req.method === 'PUT' && (m = /^\/fal\/fal-ai\/(flux|kling-video)\/requests\/([^/]+)\/cancel$/.exec(path))) {
      const job = jobs.get(m[2]!);
      if (!job) return send(res, 404, { status: 'NOT_FOUND' });
      if (outage(job, 'cancel', req, res)) return;
      if (tag(job.prompt, 'completes-on-cancel')) {
        job.completedLate = true;
        return send(res, 400, { status: 'ALREADY_COMPLETED' }, { 'X-Fal-Request-Id': job.id });
      }
      // fal's documented answers (https://fal.ai/docs/inference-api/queue/cancel): a queued
      // request is removed (OK); a running one is only signalled (CANCELLATION_REQUESTED)
      if (tag(job.prompt, 'queued')) {
        job.cancelled = true;
        return send(res, 200, { status: 'OK' }, { 'X-Fal-Request-Id': job.id });
      }
      job.cancelRequested = true;
      return send(res, 202, { status: 'CANCELLATION_REQUESTED' }, { 'X-Fal-Request-Id': job.id });
    }
    if (path.startsWith('/fal/')) {
      if (req.method === 'POST' && (path === '/fal/fal-ai/flux/schnell' || path === '/fal/fal-ai/kling-video/v1/standard/text-to-video')) {
        const kind = path.includes('kling') ? 'video' : 'image';
        const job = create('fal', res, req, String(body?.prompt), Number(body?.num_images ?? 1), kind, path.slice('/fal/'.length), body ?? {});
        if (!job) return;
        const answer: Record<string, unknown> = { status: 'IN_QUEUE', ...falUrls(job), queue_position: 0 };
        if (tag(job.prompt, 'malformed')) delete answer.status_url;
        send(res, 200, answer, { 'X-Fal-Request-Id': job.id });
        return;
      }
      if (req.method === 'GET' && (m = /^\/fal\/fal-ai\/(flux|kling-video)\/requests\/([^/]+)(\/status)?$/.exec(path))) {
        const job = jobs.get(m[2]!);
        if (!job) return sendError(res, providerError('fal', 404, 'Request not found'));
        exchanges.set(res, { ...exchanges.get(res)!, endpoint: job.model });
        const fal = { 'X-Fal-Request-Id': job.id };
        if (m[3]) {
          if (outage(job, 'status', req, res)) return;
          const s = step(job);
          // 202 while queued or running, 200 once completed; fal reports a failure on the result
          if (s === 'running' && (job.polls === 1 || tag(job.prompt, 'queued')))
            return send(res, 202, { status: 'IN_QUEUE', ...falUrls(job), queue_position: 0 }, fal);
          if (s === 'running') return send(res, 202, { status: 'IN_PROGRESS', ...falUrls(job), logs: null }, fal);
          return send(res, 200, { status: 'COMPLETED', ...falUrls(job), logs: null, metrics: { inference_time: 1.2 } }, fal);
        }
        if (outage(job, 'result', req, res)) return;
        // the model's failure, replayed by fal for a completed request: a request error
        if (tag(job.prompt, 'fail') || stoppedByCancel(job)) {
          const e = providerError('fal', 500, 'the model failed: CUDA out of memory', { errorType: 'runner_server_error' });
          return sendError(res, { ...e, headers: { ...e.headers, ...fal } });
        }
        if (job.kind === 'video') {
          return send(res, 200, { video: { url: fileUrl(job, 0), content_type: 'video/mp4', file_name: 'video.mp4', file_size: mp4.length } }, fal);
        }
        const images = Array.from({ length: job.count }, (_, i) => ({ url: fileUrl(job, i), width: 64, height: 48, content_type: 'image/png' }));
        return send(
          res,
          200,
          { images, timings: { inference: 0.4 }, seed: 1, has_nsfw_concepts: images.map((_, i) => flagged(job, i)), prompt: job.prompt },
          fal,
        );
      }
    }
    // OpenAI
    if (path.startsWith('/openai/') && req.headers.authorization !== 'Bearer test-openai') return sendError(res, providerError('openai', 401));
    if (req.method === 'POST' && path === '/openai/v1/images/generations') {
      const n = Number(body?.n ?? 1);
      const job = create('openai', res, req, String(body?.prompt), n, 'image', String(body?.model), body ?? {});
      if (!job) return;
      const data = tag(job.prompt, 'badfile')
        ? [{ b64_json: Buffer.from('nope').toString('base64') }]
        : Array.from({ length: n }, () => ({ b64_json: png.toString('base64') }));
      const answer = imagesResponse(body ?? {}, data);
      return send(res, 200, {
        ...answer,
        created: Math.floor(Date.now() / 1000),
        data: tag(job.prompt, 'malformed') ? 'not a list' : data,
        background: 'opaque',
      });
    }
    if (req.method === 'POST' && path === '/openai/v1/audio/speech') {
      const job = create('openai', res, req, String(body?.input), 1, 'image', String(body?.model), body ?? {});
      if (!job) return;
      const audio = tag(job.prompt, 'badfile') ? Buffer.from('not audio at all') : wav;
      violations.push(...contracts.checkResponse(exchanges.get(res)!, 200, 'audio/wav', audio));
      res.writeHead(200, { 'Content-Type': 'audio/wav' });
      return void res.end(audio);
    }
    const exchange = exchangeOf(req.method ?? '', path);
    if (exchange) return sendError(res, providerError(exchange.provider, 404, `no route ${req.method} ${path}`));
    res.writeHead(404).end();
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    env: {
      REPLICATE_API_TOKEN: 'test-replicate',
      FAL_KEY: 'test-fal',
      OPENAI_API_KEY: 'test-openai',
      REPLICATE_BASE_URL: `${base}/replicate/v1`,
      FAL_QUEUE_URL: `${base}/fal`,
      FAL_API_URL: `${base}/falapi/v1`,
      OPENAI_BASE_URL: `${base}/openai/v1`,
    },
    requests,
    violations,
    models,
    creates: (provider) => requests.filter((r) => r.method === 'POST' && r.path.startsWith(`/${provider}/`)),
    stop: async () => {
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
      if (violations.length > 0) {
        throw new Error(`the fake providers saw ${violations.length} provider contract violation(s):\n${[...new Set(violations)].join('\n')}`);
      }
    },
  };
}

/**
 * Image output tokens per image, as OpenAI bills them (gpt-image-1.5: its per-image prices /
 * $32 per 1M tokens). Written out here, not imported from the catalog, so the fake is not
 * the code it checks.
 */
const OPENAI_IMAGE_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1_056, '1024x1536': 1_584, '1536x1024': 1_568 },
  high: { '1024x1024': 4_160, '1024x1536': 6_240, '1536x1024': 6_208 },
};

/**
 * OpenAI's ImagesResponse for a generation (openai-node src/resources/images.ts): the quality
 * and size used, and `usage` in tokens. The output tokens are OpenAI's per image for the
 * quality and size; without a quality OpenAI picks one (auto), here the dearest, high.
 */
function imagesResponse(body: Record<string, unknown>, data: { b64_json: string }[]): Record<string, unknown> {
  const prompt = String(body.prompt);
  const quality = ['low', 'medium', 'high'].includes(String(body.quality)) ? String(body.quality) : 'high';
  const size = typeof body.size === 'string' ? body.size : '1024x1024';
  const forced = /\[usage:(\d+)\]/.exec(prompt)?.[1];
  const output = forced !== undefined ? Number(forced) : (OPENAI_IMAGE_TOKENS[quality]![size] ?? 4_160) * data.length;
  // about four bytes of English to a token, and a few tokens of framing
  const input = Math.ceil(Buffer.byteLength(prompt, 'utf8') / 4) + 7;
  return {
    created: 1,
    data,
    output_format: body.output_format ?? 'png',
    quality,
    size,
    usage: {
      input_tokens: input,
      input_tokens_details: { image_tokens: 0, text_tokens: input },
      output_tokens: output,
      output_tokens_details: { image_tokens: output, text_tokens: 0 },
      total_tokens: input + output,
    },
  };
}
