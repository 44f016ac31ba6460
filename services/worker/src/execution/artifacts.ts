import { newId, RETENTION_MS, sha256Hex } from '@tes/core';
import { databaseTime, type ArtifactSummary, type ExecutionRecord, type NewArtifact, type StepRecord } from '@tes/db';
import { artifactKey } from '@tes/storage';
import { withSpan } from '@tes/tracing';
import type { ProducedFile } from '../runner';
import type { ExecutionDeps } from './context';

type StoreDeps = Pick<ExecutionDeps, 'store' | 'logger' | 'artifactPutTimeoutMs'>;
type StoreFilesDeps = StoreDeps & Pick<ExecutionDeps, 'db'>;

/**
 * Puts a step's files in the bucket, each put bounded by `artifactPutTimeoutMs` and by `signal`
 * (the lease lost, a shutdown: its reason is thrown). If one put fails, the ones already stored
 * are deleted, and so is the failed one's key (an aborted put may still have landed): no row
 * will name them. The error is thrown on. Their expiry is the database's clock plus the
 * retention, read before the puts: the janitor compares it with tes_now(), and this worker's
 * clock may be off the database's.
 */
export async function storeFiles(deps: StoreFilesDeps, e: ExecutionRecord, index: number, files: ProducedFile[], signal: AbortSignal): Promise<NewArtifact[]> {
  const stored: NewArtifact[] = [];
  if (files.length === 0) return stored;
  const expiresAt = await databaseTime(deps.db, RETENTION_MS);
  let putting: string | undefined;
  try {
    for (const f of files) {
      const id = newId('art');
      const key = artifactKey(e.projectId, e.id, id, f.format);
      putting = key;
      await withSpan('s3.put', (span) => {
        span.setAttributes({ 'tes.artifact.format': f.format, 'tes.artifact.size_bytes': f.body.length });
        return boundedPut(deps, { key, body: f.body, contentType: f.mimeType }, signal);
      });
      putting = undefined;
      stored.push({
        id,
        format: f.format,
        mimeType: f.mimeType,
        sizeBytes: f.body.length,
        sha256: sha256Hex(f.body),
        storageKey: key,
        fileName: `${e.id}-${index}.${f.format}`,
        expiresAt,
      });
    }
  } catch (err) {
    await discardKeys(deps, [...stored.map((a) => a.storageKey), ...(putting ? [putting] : [])]);
    throw err;
  }
  return stored;
}

/** One put under the caller's signal and the put timeout; an abort throws the signal's reason. */
async function boundedPut(deps: StoreDeps, o: { key: string; body: Buffer; contentType: string }, signal: AbortSignal): Promise<void> {
  const timeout = new AbortController();
  const timer = setTimeout(
    () => timeout.abort(new Error(`artifact upload of ${o.body.length} bytes exceeded ARTIFACT_PUT_TIMEOUT_MS (${deps.artifactPutTimeoutMs} ms)`)),
    deps.artifactPutTimeoutMs,
  );
  const both = AbortSignal.any([signal, timeout.signal]);
  try {
    await deps.store.put({ ...o, signal: both });
  } catch (err) {
    // the SDK throws its own AbortError: say why it was aborted
    throw both.aborted ? both.reason : err;
  } finally {
    clearTimeout(timer);
  }
}

/** Best-effort removal of objects this worker stored and no row names. */
export async function discardArtifacts(deps: Pick<StoreDeps, 'store' | 'logger'>, artifacts: NewArtifact[]): Promise<void> {
  await discardKeys(
    deps,
    artifacts.map((a) => a.storageKey),
  );
}

async function discardKeys(deps: Pick<StoreDeps, 'store' | 'logger'>, keys: string[]): Promise<void> {
  for (const key of keys) {
    await deps.store.delete(key).catch((err: unknown) => deps.logger.warn('worker.artifact.orphaned', { storageKey: key, err: (err as Error).message }));
  }
}

export function summary(a: NewArtifact): ArtifactSummary {
  return { id: a.id, format: a.format, mimeType: a.mimeType, sizeBytes: a.sizeBytes, sha256: a.sha256, expiresAt: a.expiresAt.toISOString() };
}

/** A succeeded execution's output: every step's facts merged in order, and all their artifacts. */
export function executionOutput(steps: StepRecord[]): Record<string, unknown> {
  const output: Record<string, unknown> = {};
  const artifacts: ArtifactSummary[] = [];
  for (const s of steps) {
    const cp = s.checkpoint as { artifacts?: ArtifactSummary[]; facts?: Record<string, unknown> } | null;
    if (cp?.facts) Object.assign(output, cp.facts);
    if (cp?.artifacts) artifacts.push(...cp.artifacts);
  }
  output.artifacts = artifacts;
  return output;
}
