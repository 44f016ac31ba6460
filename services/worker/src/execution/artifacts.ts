import { newId, RETENTION_MS, sha256Hex } from '@tes/core';
import { databaseTime, type ArtifactSummary, type ExecutionRecord, type NewArtifact, type StepRecord } from '@tes/db';
import { artifactKey } from '@tes/storage';
import { withSpan } from '@tes/tracing';
import type { ProducedFile } from '../runner';
import type { ExecutionDeps } from './context';

type StoreDeps = Pick<ExecutionDeps, 'store' | 'logger'>;
type StoreFilesDeps = StoreDeps & Pick<ExecutionDeps, 'db'>;

/**
 * Puts a step's files in the bucket. If one put fails, the ones already stored are deleted
 * (no row will name them) and the error is thrown on. Their expiry is the database's clock
 * plus the retention, read before the puts: the janitor compares it with tes_now(), and this
 * worker's clock may be off the database's.
 */
export async function storeFiles(deps: StoreFilesDeps, e: ExecutionRecord, index: number, files: ProducedFile[]): Promise<NewArtifact[]> {
  const stored: NewArtifact[] = [];
  if (files.length === 0) return stored;
  const expiresAt = await databaseTime(deps.db, RETENTION_MS);
  try {
    for (const f of files) {
      const id = newId('art');
      const key = artifactKey(e.projectId, e.id, id, f.format);
      await withSpan('s3.put', (span) => {
        span.setAttributes({ 'tes.artifact.format': f.format, 'tes.artifact.size_bytes': f.body.length });
        return deps.store.put({ key, body: f.body, contentType: f.mimeType });
      });
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
    await discardArtifacts(deps, stored);
    throw err;
  }
  return stored;
}

/** Best-effort removal of objects this worker stored and no row names. */
export async function discardArtifacts(deps: StoreDeps, artifacts: NewArtifact[]): Promise<void> {
  for (const a of artifacts) {
    await deps.store
      .delete(a.storageKey)
      .catch((err: unknown) => deps.logger.warn('worker.artifact.orphaned', { storageKey: a.storageKey, err: (err as Error).message }));
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
