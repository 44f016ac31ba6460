import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
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
 * and outages of a job's reads, from the first such request for MS milliseconds (or forever):
 *   [status-CODE:MS]  status polls answer HTTP CODE      [status-drop:MS]  ... drop the connection
 *   [result-CODE:MS]  fal's result URL, the same         [result-drop:MS]
 *   [file-CODE:MS]    the output files, the same         [file-drop:MS]
 * An outage's answers come from in front of the provider: fal's own answers carry
 * X-Fal-Request-Id, these do not.
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
  creates(provider: 'replicate' | 'fal' | 'openai'): RecordedRequest[];
  stop(): Promise<void>;
}

type ReadPoint = 'status' | 'result' | 'file' | 'cancel';

interface Job {
  id: string;
  prompt: string;
  polls: number;
  count: number;
  kind: 'image' | 'video';
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

export async function startFakeProviders(): Promise<FakeProviders> {
  const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3366cc' } })
    .png()
    .toBuffer();
  const mp4 = await ffmpegMake(['-f', 'lavfi', '-i', 'testsrc=size=160x120:rate=25:duration=5', '-c:v', 'libx264', '-pix_fmt', 'yuv420p'], 'g.mp4');
  const wav = await ffmpegMake(['-f', 'lavfi', '-i', 'sine=frequency=300:duration=1.5', '-ac', '1', '-ar', '24000'], 's.wav');
  const jobs = new Map<string, Job>();
  const requests: RecordedRequest[] = [];
  const seen429 = new Set<string>();
  /** When each [throttle:…] prompt's first create arrived. */
  const throttledFrom = new Map<string, number>();
  let seq = 0;
  let base = '';

  const tag = (prompt: string, t: string) => prompt.includes(`[${t}]`);
  const pollsNeeded = (prompt: string) => Number(/\[polls:(\d+)\]/.exec(prompt)?.[1] ?? 1);
  const fileUrl = (job: Job, i: number) =>
    `${base}/files/${job.id}/` + (tag(job.prompt, 'badfile') ? 'bad.bin' : job.kind === 'video' ? 'video.mp4' : `img-${i}.png`);

  /** Answers for the job's outage at `point` if one is on; true when it did. */
  function outage(job: Job, point: ReadPoint, req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const m = new RegExp(`\\[${point}-(\\d{3}|drop):(\\d+|forever)\\]`).exec(job.prompt);
    if (!m) return false;
    const from = (job.outageFrom[point] ??= Date.now());
    if (m[2] !== 'forever' && Date.now() - from >= Number(m[2])) return false;
    if (m[1] === 'drop') req.socket.destroy();
    else send(res, Number(m[1]), { detail: 'upstream unavailable' });
    return true;
  }

  /** Shared create behaviour; returns a job id, or null when the response was already sent. */
  function create(res: http.ServerResponse, req: http.IncomingMessage, prompt: string, count: number, kind: Job['kind']): string | null {
    if (tag(prompt, 'hang')) {
      req.socket.destroy();
      return null;
    }
    if (tag(prompt, '500')) return (send(res, 500, { detail: 'internal error' }), null);
    if (tag(prompt, 'reject')) return (send(res, 422, { detail: 'invalid input' }), null);
    if (tag(prompt, '429once') && !seen429.has(prompt)) {
      seen429.add(prompt);
      res.setHeader('Retry-After', '0');
      return (send(res, 429, { detail: 'rate limited' }), null);
    }
    const throttle = /\[throttle:(\d+):(\d+)\]/.exec(prompt);
    if (throttle) {
      const from = throttledFrom.get(prompt) ?? Date.now();
      throttledFrom.set(prompt, from);
      if (Date.now() - from < Number(throttle[1])) {
        // Replicate's answer (replicate-javascript lib/util.js honours its Retry-After)
        res.setHeader('Retry-After', throttle[2]!);
        return (send(res, 429, { detail: `Request was throttled. Your rate limit resets in ~${throttle[2]}s.`, status: 429 }), null);
      }
    }
    const id = `job${++seq}`;
    jobs.set(id, { id, prompt, polls: 0, count: tag(prompt, 'empty') ? 0 : count, kind, outageFrom: {} });
    const cancelAfter = /^(\d+)s$/.exec(String(req.headers['cancel-after'] ?? ''));
    if (cancelAfter) jobs.get(id)!.cancelAt = Date.now() + Number(cancelAfter[1]) * 1000;
    return id;
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

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
      const path = (req.url ?? '').split('?')[0]!;
      requests.push({ at: Date.now(), method: req.method ?? '', path, authorization: req.headers.authorization, body, headers: req.headers });
      route(req, res, path, body);
    });
  });

  function route(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: Record<string, unknown> | undefined): void {
    let m: RegExpExecArray | null;
    if ((m = /^\/files\/([^/]+)\/[^/]+$/.exec(path))) {
      const job = jobs.get(m[1]!);
      if (!job) return send(res, 404, { detail: 'Not found' });
      if (outage(job, 'file', req, res)) return;
      if (path.endsWith('/bad.bin')) return void res.end('<html>not a file</html>');
      res.setHeader('Content-Type', path.endsWith('.mp4') ? 'video/mp4' : 'image/png');
      return void res.end(path.endsWith('.mp4') ? mp4 : png);
    }
    // Replicate
    if (path.startsWith('/replicate/')) {
      if (req.headers.authorization !== 'Bearer test-replicate') return send(res, 401, { detail: 'Unauthenticated' });
      if (req.method === 'POST' && (m = /^\/replicate\/v1\/models\/([^/]+)\/([^/]+)\/predictions$/.exec(path))) {
        const input = (body?.input ?? {}) as Record<string, unknown>;
        const kind = m[1] === 'kwaivgi' ? 'video' : 'image';
        const id = create(res, req, String(input.prompt), Number(input.num_outputs ?? 1), kind);
        if (id) send(res, 201, { id, status: 'starting', input, output: null, error: null, urls: { get: `${base}/replicate/v1/predictions/${id}` } });
        return;
      }
      if (req.method === 'GET' && (m = /^\/replicate\/v1\/predictions\/([^/]+)$/.exec(path))) {
        const job = jobs.get(m[1]!);
        if (!job) return send(res, 404, { detail: 'Not found' });
        if (outage(job, 'status', req, res)) return;
        const s = step(job);
        if (s === 'running') return send(res, 200, { id: m[1], status: 'processing', output: null, error: null });
        if (s === 'failed') return send(res, 200, { id: m[1], status: 'failed', output: null, error: 'CUDA out of memory' });
        if (s === 'cancelled') return send(res, 200, { id: m[1], status: 'canceled', output: null, error: null });
        const urls = Array.from({ length: job.count }, (_, i) => fileUrl(job, i));
        return send(res, 200, { id: m[1], status: 'succeeded', output: job.kind === 'video' ? urls[0] : urls, error: null, metrics: { predict_time: 1.2 } });
      }
    }
    // Replicate: cancel (POST /predictions/{id}/cancel answers the prediction)
    if (req.method === 'POST' && (m = /^\/replicate\/v1\/predictions\/([^/]+)\/cancel$/.exec(path))) {
      if (req.headers.authorization !== 'Bearer test-replicate') return send(res, 401, { detail: 'Unauthenticated' });
      const job = jobs.get(m[1]!);
      if (!job) return send(res, 404, { detail: 'Not found' });
      if (outage(job, 'cancel', req, res)) return;
      if (tag(job.prompt, 'completes-on-cancel')) job.completedLate = true;
      else job.cancelled = true;
      return send(res, 200, { id: job.id, status: job.completedLate ? 'succeeded' : 'canceled', output: null, error: null });
    }
    // fal
    if (req.method === 'PUT' && (m = /^\/fal\/fal-ai\/(flux|kling-video)\/requests\/([^/]+)\/cancel$/.exec(path))) {
      if (req.headers.authorization !== 'Key test-fal') return send(res, 401, { detail: 'Unauthorized' });
      const job = jobs.get(m[2]!);
      if (!job) return send(res, 404, { detail: 'Request not found' });
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
      if (req.headers.authorization !== 'Key test-fal') return send(res, 401, { detail: 'Unauthorized' });
      if (req.method === 'POST' && (path === '/fal/fal-ai/flux/schnell' || path === '/fal/fal-ai/kling-video/v1/standard/text-to-video')) {
        const kind = path.includes('kling') ? 'video' : 'image';
        const id = create(res, req, String(body?.prompt), Number(body?.num_images ?? 1), kind);
        if (id) send(res, 200, { request_id: id, status_url: 'ignored', response_url: 'ignored', cancel_url: 'ignored' }, { 'X-Fal-Request-Id': id });
        return;
      }
      if (req.method === 'GET' && (m = /^\/fal\/fal-ai\/(flux|kling-video)\/requests\/([^/]+)(\/status)?$/.exec(path))) {
        const job = jobs.get(m[2]!);
        if (!job) return send(res, 404, { detail: 'Request not found' });
        const fal = { 'X-Fal-Request-Id': job.id };
        if (m[3]) {
          if (outage(job, 'status', req, res)) return;
          const s = step(job);
          if (s === 'failed') return send(res, 200, { status: 'COMPLETED' }, fal); // fal reports errors on the result
          const queued = job.polls === 1 || tag(job.prompt, 'queued');
          return send(res, 200, { status: s === 'done' ? 'COMPLETED' : queued ? 'IN_QUEUE' : 'IN_PROGRESS', queue_position: 0 }, fal);
        }
        if (outage(job, 'result', req, res)) return;
        // the model's error, replayed by fal's server for a completed request
        if (tag(job.prompt, 'fail') || stoppedByCancel(job)) return send(res, 500, { detail: 'generation failed' }, fal);
        if (job.kind === 'video') return send(res, 200, { video: { url: fileUrl(job, 0), content_type: 'video/mp4' } }, fal);
        return send(
          res,
          200,
          {
            images: Array.from({ length: job.count }, (_, i) => ({ url: fileUrl(job, i), width: 64, height: 48, content_type: 'image/png' })),
            seed: 1,
            has_nsfw_concepts: Array.from({ length: job.count }, (_, i) => flagged(job, i)),
          },
          fal,
        );
      }
    }
    // OpenAI
    if (req.method === 'POST' && path === '/openai/v1/images/generations') {
      if (req.headers.authorization !== 'Bearer test-openai') return send(res, 401, { error: { message: 'Incorrect API key' } });
      const id = create(res, req, String(body?.prompt), Number(body?.n ?? 1), 'image');
      if (!id) return;
      const data = tag(String(body?.prompt), 'badfile')
        ? [{ b64_json: Buffer.from('nope').toString('base64') }]
        : Array.from({ length: Number(body?.n ?? 1) }, () => ({ b64_json: png.toString('base64') }));
      return send(res, 200, { created: 1, data, usage: { total_tokens: 100 } });
    }
    if (req.method === 'POST' && path === '/openai/v1/audio/speech') {
      if (req.headers.authorization !== 'Bearer test-openai') return send(res, 401, { error: { message: 'Incorrect API key' } });
      const id = create(res, req, String(body?.input), 1, 'image');
      if (!id) return;
      res.writeHead(200, { 'Content-Type': 'audio/wav' });
      return void res.end(tag(String(body?.input), 'badfile') ? Buffer.from('not audio at all') : wav);
    }
    send(res, 404, { detail: `no route ${req.method} ${path}` });
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
      OPENAI_BASE_URL: `${base}/openai/v1`,
    },
    requests,
    creates: (provider) => requests.filter((r) => r.method === 'POST' && r.path.startsWith(`/${provider}/`)),
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}
