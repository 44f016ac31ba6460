/**
 * `models check` (issue #28): whether the providers still serve the models the catalog offers,
 * and whether their announced shutdown dates are the retirement dates we hold. Read-only; it
 * changes nothing. A retirement date is set in the catalog (a release) or with
 * MODEL_RETIREMENTS (configuration).
 */
import type { Knex } from 'knex';
import { Catalog, utcDay, type ProviderModel } from '@tes/catalog';
import { databaseTime } from '@tes/db';
import { table } from './format';
import type { CliSettings, CommandSpec } from './spec';

/** One request to a provider: enough for a slow API, short enough for a cron job. */
const TIMEOUT_MS = 10_000;

type Result = 'ok' | 'mismatch' | 'unchecked' | 'skipped';

export interface ModelCheckRow {
  /** "tool:model", as MODEL_RETIREMENTS names it. */
  model: string;
  provider: ProviderModel['name'];
  providerModel: string;
  /** What the provider said, in words. */
  providerStatus: string;
  /** Our retirement date: the catalog's, or the operator's. */
  retiresOn: string | null;
  result: Result;
}

/** What a provider said about a model, reduced to what decides agreement. */
type Lookup =
  | { kind: 'served'; shutdownDate: string | null; deprecated?: boolean; status: string }
  | { kind: 'gone'; status: string }
  | { kind: 'unknown'; status: string };

type Providers = NonNullable<CliSettings['providers']>;

async function getJson(url: string, authorization: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { headers: { Authorization: authorization, Accept: 'application/json' }, signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: only the status is read
  }
  return { status: res.status, body };
}

/** The answers every provider gives alike: refused credential, not found, a server error. */
function byStatus(status: number): Lookup | undefined {
  if (status === 401 || status === 403) return { kind: 'unknown', status: `credential refused (HTTP ${status})` };
  if (status === 404) return { kind: 'gone', status: 'not found (HTTP 404)' };
  if (status !== 200) return { kind: 'unknown', status: `HTTP ${status}` };
  return undefined;
}

/** OpenAI GET /models/{id}: the Model object, whose shutdown_date is null until one is announced. */
async function openaiLookup(p: Providers, model: string, key: string, today: string): Promise<Lookup> {
  const res = await getJson(`${p.baseUrls.openai}/models/${encodeURIComponent(model)}`, `Bearer ${key}`);
  const decided = byStatus(res.status);
  if (decided) return decided;
  const date = (res.body as { shutdown_date?: unknown } | null)?.shutdown_date;
  const shutdownDate = typeof date === 'string' ? date.slice(0, 10) : null;
  const status = shutdownDate === null ? 'available' : shutdownDate <= today ? `shut down on ${shutdownDate}` : `shuts down on ${shutdownDate}`;
  return { kind: 'served', shutdownDate, status };
}

/** Replicate GET /models/{owner}/{name}: 200 while the model exists (Replicate announces no dates). */
async function replicateLookup(p: Providers, model: string, key: string): Promise<Lookup> {
  const res = await getJson(`${p.baseUrls.replicate}/models/${model.split('/').map(encodeURIComponent).join('/')}`, `Bearer ${key}`);
  return byStatus(res.status) ?? { kind: 'served', shutdownDate: null, status: 'available' };
}

/** fal's platform API GET /models?endpoint_id=: the endpoint and its metadata.status (active, deprecated). */
async function falLookup(p: Providers, model: string, key: string): Promise<Lookup> {
  const res = await getJson(`${p.baseUrls.falApi}/models?endpoint_id=${encodeURIComponent(model)}`, `Key ${key}`);
  const decided = byStatus(res.status);
  if (decided) return decided;
  const found = ((res.body as { models?: unknown } | null)?.models ?? []) as { endpoint_id?: unknown; metadata?: { status?: unknown } }[];
  const entry = Array.isArray(found) ? found.find((m) => m.endpoint_id === model) : undefined;
  if (!entry) return { kind: 'gone', status: 'not found' };
  const status = typeof entry.metadata?.status === 'string' ? entry.metadata.status : 'active';
  return { kind: 'served', shutdownDate: null, deprecated: status === 'deprecated', status };
}

async function lookup(p: Providers, m: ProviderModel, key: string, today: string): Promise<Lookup> {
  try {
    switch (m.name) {
      case 'openai':
        return await openaiLookup(p, m.model, key, today);
      case 'replicate':
        return await replicateLookup(p, m.model, key);
      case 'fal':
        return await falLookup(p, m.model, key);
    }
  } catch (err) {
    return { kind: 'unknown', status: `unreachable: ${(err as Error).message.slice(0, 80)}` };
  }
}

/**
 * Agreement: a model the provider no longer serves must be retired by us (on or before today);
 * a shutdown date it announced must be our date; a model it marks deprecated without a date
 * needs a date of ours; a model it serves with nothing announced must not be retired by us yet
 * (a date of ours still to come is the operator's plan, and agrees).
 */
function agrees(found: Lookup, ours: string | undefined, today: string): Result {
  switch (found.kind) {
    case 'unknown':
      return 'unchecked';
    case 'gone':
      return ours !== undefined && ours <= today ? 'ok' : 'mismatch';
    case 'served':
      if (found.shutdownDate !== null) return ours === found.shutdownDate ? 'ok' : 'mismatch';
      if (found.deprecated) return ours !== undefined ? 'ok' : 'mismatch';
      return ours === undefined || ours > today ? 'ok' : 'mismatch';
  }
}

async function checkModels(db: Knex, settings: CliSettings, note: (text: string) => void): Promise<{ today: string; models: ModelCheckRow[] }> {
  const p: Providers = settings.providers ?? { baseUrls: { openai: '', replicate: '', falApi: '' }, credentials: {} };
  const catalog = new Catalog({ enableTestTools: false, providers: { openai: true, replicate: true, fal: true }, retirements: settings.modelRetirements });
  // the day the catalog compares retirement dates with: the database's, as the gateway's
  const today = utcDay(await databaseTime(db));
  const models: ModelCheckRow[] = [];
  for (const tool of catalog.tools.values()) {
    for (const m of tool.models) {
      if (!m.provider) continue;
      const retiresOn = catalog.retiresOn(tool.name, m.id) ?? null;
      const base = { model: `${tool.name}:${m.id}`, provider: m.provider.name, providerModel: m.provider.model, retiresOn };
      const key = p.credentials[m.provider.name];
      if (!key) {
        models.push({ ...base, providerStatus: 'no credential configured', result: 'skipped' });
        continue;
      }
      const found = await lookup(p, m.provider, key, today);
      models.push({ ...base, providerStatus: found.status, result: agrees(found, retiresOn ?? undefined, today) });
    }
  }
  if (models.every((r) => r.result === 'skipped'))
    note('no provider credential is configured (OPENAI_API_KEY, REPLICATE_API_TOKEN, FAL_KEY): nothing was checked');
  return { today, models };
}

export const MODEL_COMMANDS: CommandSpec[] = [
  {
    name: 'models check',
    summary:
      'Check each provider model of the catalog at its provider: still served, and its shutdown date the same as our retirement date. Exit 1 on a mismatch.',
    options: {},
    notes: [
      'Asks each provider whose credential is configured (OPENAI_API_KEY, REPLICATE_API_TOKEN, FAL_KEY), at the',
      'configured base URLs (OPENAI_BASE_URL, REPLICATE_BASE_URL, FAL_API_URL):',
      '  OpenAI     GET /v1/models/{id}              (its shutdown_date, null until one is announced)',
      '  Replicate  GET /v1/models/{owner}/{name}    (the model exists)',
      '  fal        GET /v1/models?endpoint_id={id}  (the endpoint exists; metadata.status active or deprecated)',
      "Columns: MODEL (tool:model, as MODEL_RETIREMENTS names it), PROVIDER, PROVIDER MODEL (the provider's id),",
      "PROVIDER STATUS (what it answered), OUR RETIREMENT (the catalog's date or MODEL_RETIREMENTS's), RESULT:",
      '  ok         the provider and we agree',
      '  mismatch   it shuts the model down on another day than ours, no longer serves one we offer, marks it',
      '             deprecated without a date of ours, or serves one we retired: set MODEL_RETIREMENTS=tool:model=YYYY-MM-DD',
      '             (and restart the gateways), or ship a catalog with the successor model',
      '  unchecked  the provider could not be asked (unreachable, credential refused, an error)',
      '  skipped    no credential for that provider',
      'Exit status: 0 every checked model agrees; 1 a mismatch or an unchecked model; 2 bad usage.',
      'Example (a daily cron job): npm run -s admin -- models check --json > models-check.json',
    ],
    run: (db, _opts, _positionals, note, settings) => checkModels(db, settings, note),
    failed: (result) => (result as { models: ModelCheckRow[] }).models.some((r) => r.result === 'mismatch' || r.result === 'unchecked'),
    render: (result: never) =>
      table((result as { models: ModelCheckRow[] }).models, [
        { header: 'model', value: (r) => r.model },
        { header: 'provider', value: (r) => r.provider },
        { header: 'provider model', value: (r) => r.providerModel },
        { header: 'provider status', value: (r) => r.providerStatus },
        { header: 'our retirement', value: (r) => r.retiresOn },
        { header: 'result', value: (r) => r.result },
      ]),
  },
];
