import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

/**
 * Checks requests to and answers from the provider APIs against the JSON Schemas in
 * tests/provider-contracts (taken from each provider's OpenAPI document or official SDK; see
 * SOURCES.md there). The fake providers run every request they receive and every answer
 * they send through it, so neither our adapters nor the fakes can speak a dialect the real
 * APIs do not.
 */

/** The schema folder, from src/ or dist/ alike. */
const PROVIDER_CONTRACTS_DIR = path.resolve(__dirname, '../../../tests/provider-contracts');

export type ContractProvider = 'openai' | 'replicate' | 'fal';

export interface ProviderExchange {
  provider: ContractProvider;
  method: string;
  /** The path after the provider's base URL (…/v1 for OpenAI and Replicate, the queue root for fal). */
  path: string;
  /** fal only: the endpoint the request was submitted to, which its result URL no longer names. */
  endpoint?: string;
}

/** What an answer's body must be: a JSON schema, or bytes (audio, files). */
type Expect = { schema: string } | { bytes: true };

interface Operation {
  provider: ContractProvider;
  method: string;
  pattern: RegExp;
  /** Schema files for the request body; each with the JSON pointer of the part it checks. */
  request?: (m: RegExpExecArray) => { schema: string; at: string; optional?: boolean }[];
  response: (status: number, m: RegExpExecArray, endpoint: string | undefined) => Expect;
}

const modelFile = (id: string) => id.replace(/\//g, '-');

/** Every provider operation our adapters use, with the schemas of its request and answers. */
const OPERATIONS: Operation[] = [
  {
    provider: 'openai',
    method: 'POST',
    pattern: /^\/images\/generations$/,
    request: () => [{ schema: 'openai/images-generations.request.json', at: '' }],
    response: (s) => ({ schema: ok(s) ? 'openai/images-generations.response.json' : 'openai/error.json' }),
  },
  {
    provider: 'openai',
    method: 'POST',
    pattern: /^\/audio\/speech$/,
    request: () => [{ schema: 'openai/audio-speech.request.json', at: '' }],
    response: (s) => (ok(s) ? { bytes: true } : { schema: 'openai/error.json' }),
  },
  {
    provider: 'replicate',
    method: 'POST',
    pattern: /^\/models\/([^/]+)\/([^/]+)\/predictions$/,
    request: (m) => [
      { schema: 'replicate/predictions-create.request.json', at: '' },
      // Not every model has a published input schema we could take (see SOURCES.md).
      { schema: `replicate/models/${m[1]}-${m[2]}.input.json`, at: '/input', optional: true },
    ],
    response: (s) => ({ schema: ok(s) ? 'replicate/prediction.response.json' : 'replicate/problem.json' }),
  },
  {
    provider: 'replicate',
    method: 'GET',
    pattern: /^\/predictions\/([^/]+)$/,
    response: (s) => ({ schema: ok(s) ? 'replicate/prediction.response.json' : 'replicate/problem.json' }),
  },
  {
    provider: 'replicate',
    method: 'POST',
    pattern: /^\/predictions\/([^/]+)\/cancel$/,
    response: (s) => ({ schema: ok(s) ? 'replicate/prediction.response.json' : 'replicate/problem.json' }),
  },
  {
    provider: 'fal',
    method: 'PUT',
    pattern: /^\/([^/]+)\/([^/]+)\/requests\/([^/]+)\/cancel$/,
    response: (s) => ({ schema: ok(s) || s === 400 || s === 404 ? 'fal/queue-cancel.response.json' : 'fal/error.json' }),
  },
  {
    provider: 'fal',
    method: 'GET',
    pattern: /^\/([^/]+)\/([^/]+)\/requests\/([^/]+)\/status$/,
    response: (s) => ({ schema: ok(s) ? 'fal/queue-status.response.json' : 'fal/error.json' }),
  },
  {
    provider: 'fal',
    method: 'GET',
    pattern: /^\/([^/]+)\/([^/]+)\/requests\/([^/]+)$/,
    response: (s, _m, endpoint) => ({ schema: ok(s) ? `fal/models/${modelFile(endpoint ?? 'unknown')}.output.json` : 'fal/error.json' }),
  },
  {
    provider: 'fal',
    method: 'POST',
    pattern: /^\/(.+)$/,
    request: (m) => [{ schema: `fal/models/${modelFile(m[1]!)}.input.json`, at: '' }],
    response: (s) => ({ schema: ok(s) ? 'fal/queue-submit.response.json' : 'fal/error.json' }),
  },
];

function ok(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Follows an RFC 6901 pointer ('' is the whole document). */
function at(value: unknown, pointer: string): unknown {
  let node = value;
  for (const token of pointer.split('/').slice(1)) node = (node as Record<string, unknown> | undefined)?.[token];
  return node;
}

export class ProviderContracts {
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(readonly dir: string = PROVIDER_CONTRACTS_DIR) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    // OpenAI's document marks Unix timestamps with a format of its own; the type says enough.
    this.ajv.addFormat('unixtime', true);
  }

  /** Every schema file in the folder, compiled: a broken file fails here, not in the middle of a test. */
  schemaFiles(): string[] {
    const files: string[] = [];
    const walk = (rel: string) => {
      for (const entry of readdirSync(path.join(this.dir, rel), { withFileTypes: true })) {
        const child = rel ? `${rel}/${entry.name}` : entry.name;
        if (entry.isDirectory()) walk(child);
        else if (entry.name.endsWith('.json')) files.push(child);
      }
    };
    walk('');
    for (const f of files) this.validator(f);
    return files.sort();
  }

  /** Whether a contract covers this operation at all. */
  covers(exchange: ProviderExchange): boolean {
    return !('problem' in this.operation(exchange));
  }

  /** Violations of the request's body, as readable lines; empty when it conforms. */
  checkRequest(exchange: ProviderExchange, body: unknown): string[] {
    const found = this.operation(exchange);
    if ('problem' in found) return [found.problem];
    const problems: string[] = [];
    for (const part of found.op.request?.(found.match) ?? []) {
      if (part.optional && !existsSync(path.join(this.dir, part.schema))) continue;
      problems.push(...this.validate(part.schema, at(body, part.at), `${label(exchange)} request`, part.at));
    }
    return problems;
  }

  /**
   * Violations of an answer: `body` is its raw bytes, parsed here when the operation answers
   * JSON. Empty when it conforms.
   */
  checkResponse(exchange: ProviderExchange, status: number, contentType: string | undefined, body: Buffer | string): string[] {
    const found = this.operation(exchange);
    if ('problem' in found) return [found.problem];
    const expect = found.op.response(status, found.match, exchange.endpoint);
    const where = `${label(exchange)} answer ${status}`;
    if ('bytes' in expect) return body.length > 0 ? [] : [`${where}: an empty body where the provider sends bytes`];
    if (!/[/+]json\b/.test(contentType ?? '')) return [`${where}: Content-Type ${contentType ?? '(none)'} where the provider sends JSON`];
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString());
    } catch {
      return [`${where}: a body that is not JSON`];
    }
    return this.validate(expect.schema, parsed, where);
  }

  private operation(exchange: ProviderExchange): { op: Operation; match: RegExpExecArray } | { problem: string } {
    for (const op of OPERATIONS) {
      if (op.provider !== exchange.provider || op.method !== exchange.method) continue;
      const match = op.pattern.exec(exchange.path);
      if (match) return { op, match };
    }
    return { problem: `${label(exchange)}: no provider contract covers this operation` };
  }

  private validate(schema: string, value: unknown, where: string, prefix = ''): string[] {
    if (!existsSync(path.join(this.dir, schema))) return [`${where}: no schema ${schema} in ${this.dir}`];
    const v = this.validator(schema);
    if (v(value)) return [];
    return (v.errors ?? []).map((e) => `${where} breaks ${schema}: ${prefix + e.instancePath || '(root)'} ${e.message ?? ''}`.trim());
  }

  private validator(schema: string): ValidateFunction {
    let v = this.validators.get(schema);
    if (!v) {
      v = this.ajv.compile(JSON.parse(readFileSync(path.join(this.dir, schema), 'utf8')) as object);
      this.validators.set(schema, v);
    }
    return v;
  }
}

function label(e: ProviderExchange): string {
  return `${e.provider} ${e.method} ${e.path}`;
}
