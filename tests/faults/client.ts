import http from 'node:http';
import { loadOpenApi, OpenApiValidator } from '@tes/testing';
import { sleep } from './cluster';

/**
 * A client that behaves as the API asks of one (docs/api.md#submit-post-toolstool): a lost
 * response proves nothing, so a submit is resent with the same key and the same body until
 * a real answer arrives. Every answer is checked against openapi.json and every status is
 * tallied, so a suite can assert that no 500 was ever returned.
 */
export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** The connection failed or broke before a response arrived (refused, reset, timeout). */
export interface Lost {
  lost: string;
}

export interface Attempt {
  at: number;
  status?: number;
  lost?: string;
  executionId?: string;
  replayed?: boolean;
  retryAfterSeconds?: number;
}

export interface Submission {
  key: string;
  secret: string;
  projectId: string;
  tool: string;
  body: Record<string, unknown>;
  attempts: Attempt[];
  /** Set once a 202/200 named the execution. */
  executionId?: string;
}

let validator: OpenApiValidator | undefined;

export class FaultClient {
  /** Every HTTP status received, by status. */
  readonly statuses = new Map<number, number>();
  /** Responses that did not match openapi.json (asserted empty at the end). */
  readonly contractProblems: string[] = [];

  constructor(private readonly baseUrl: string) {
    validator ??= new OpenApiValidator(loadOpenApi());
  }

  /** One HTTP exchange on a fresh connection (no keep-alive: a killed gateway leaves no pooled socket). */
  request(
    method: string,
    path: string,
    secret: string,
    options: { headers?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
  ): Promise<Reply | Lost> {
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    return new Promise((resolve) => {
      const req = http.request(
        `${this.baseUrl}${path}`,
        {
          method,
          agent: false,
          timeout: options.timeoutMs ?? 15_000,
          headers: {
            Authorization: `Bearer ${secret}`,
            Connection: 'close',
            ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) } : {}),
            ...options.headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (err) => resolve({ lost: `response broke: ${err.message}` }));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            let body: unknown;
            try {
              body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              body = Buffer.concat(chunks).toString('utf8');
            }
            this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
            try {
              validator!.assertValid(method, path, status, res.headers, body);
            } catch (err) {
              this.contractProblems.push(`${method} ${path} ${status}: ${(err as Error).message.slice(0, 400)}`);
            }
            resolve({ status, headers: res.headers, body });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (err: NodeJS.ErrnoException) => resolve({ lost: err.code ?? err.message }));
      req.end(payload);
    });
  }

  async quote(secret: string, tool: string, args: Record<string, unknown>): Promise<{ priceVersion: string; maximumChargeMicros: number }> {
    const r = await this.request('POST', '/tools/quote', secret, { body: { tool, arguments: args } });
    if ('lost' in r || r.status !== 200) throw new Error(`quote ${tool}: ${JSON.stringify(r)}`);
    return r.body.data;
  }

  /** A submission with its body fixed once: every resend carries exactly these bytes' meaning. */
  async prepare(secret: string, projectId: string, key: string, tool: string, args: Record<string, unknown>): Promise<Submission> {
    const q = await this.quote(secret, tool, args);
    return {
      key,
      secret,
      projectId,
      tool,
      body: { tool, arguments: args, priceVersion: q.priceVersion, maximumChargeMicros: q.maximumChargeMicros },
      attempts: [],
    };
  }

  /** One attempt; records it on the submission. */
  async send(s: Submission): Promise<Attempt> {
    const r = await this.request('POST', `/tools/${s.tool}`, s.secret, { headers: { 'Idempotency-Key': s.key }, body: s.body });
    const attempt: Attempt = { at: Date.now() };
    if ('lost' in r) attempt.lost = r.lost;
    else {
      attempt.status = r.status;
      if (r.headers['retry-after'] !== undefined && r.status === 429) attempt.retryAfterSeconds = Number(r.headers['retry-after']);
      if (r.status === 202 || r.status === 200) {
        attempt.executionId = r.body.data.id;
        attempt.replayed = r.headers['idempotent-replayed'] === 'true';
        s.executionId ??= attempt.executionId;
      }
    }
    s.attempts.push(attempt);
    return attempt;
  }

  /**
   * The client's duty after a lost response or a 5xx: resend the same key and body until a
   * definite answer, pausing between tries, up to a deadline. A 500 is resent too, as a
   * careful client would (it is still tallied as a failure of the service), and so is a
   * request-rate 429, after its Retry-After (capped). Money 429s are definite answers.
   */
  async sendUntilAnswered(s: Submission, deadlineMs = 60_000, pauseMs = 300): Promise<Attempt> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const a = await this.send(s);
      const rateLimited = a.status === 429 && a.retryAfterSeconds !== undefined;
      if (a.lost === undefined && a.status! < 500 && !rateLimited) return a;
      if (Date.now() > until) return a;
      await sleep(rateLimited ? Math.min(a.retryAfterSeconds! * 1_000, 5_000) : pauseMs);
    }
  }

  statusSummary(): Record<string, number> {
    return Object.fromEntries([...this.statuses.entries()].sort((a, b) => a[0] - b[0]).map(([k, v]) => [String(k), v]));
  }
}
