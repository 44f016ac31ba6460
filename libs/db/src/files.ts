import type { Knex } from 'knex';
import { newId, type FileFacts } from '@tes/core';
import { iso } from './time';

export interface FileRecord {
  id: string;
  projectId: string;
  sha256: string;
  format: string;
  mimeType: string;
  sizeBytes: number;
  storageKey: string;
  /** What the upload was measured to hold; null for files stored without (see the migration). */
  facts: FileFacts | null;
  expiresAt: string;
  createdAt: string;
}

/** A files row as node-postgres returns it: the mapper is the typed boundary. */
interface FileRow {
  id: string;
  project_id: string;
  sha256: string;
  format: string;
  mime_type: string;
  size_bytes: number;
  storage_key: string;
  /** jsonb written only by recordUpload from a FileFacts. */
  facts: FileFacts | null;
  expires_at: Date;
  created_at: Date;
}

function toFile(row: FileRow): FileRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    sha256: row.sha256,
    format: row.format,
    mimeType: row.mime_type,
    sizeBytes: row.size_bytes,
    storageKey: row.storage_key,
    facts: row.facts,
    expiresAt: iso(row.expires_at)!,
    createdAt: iso(row.created_at)!,
  };
}

const FILE_COLUMNS: (keyof FileRow)[] = ['id', 'project_id', 'sha256', 'format', 'mime_type', 'size_bytes', 'storage_key', 'facts', 'expires_at', 'created_at'];

/**
 * "Not deleted", for statements that reach files by id, written so that the planner can only
 * reach them by id (issue #24; the idiom of executions/status-guard.ts).
 *
 * `deleted_at IS NULL` implies the predicate of files_expiry_idx (the janitor's: expires_at of
 * files not deleted), and `expires_at > tes_now()` is then its index condition. A day's uploads
 * are newer than the last ANALYZE, so the statistics place every one past the histogram's end
 * and the planner counts none: it preferred that index to the primary key, and each submit read
 * every live upload of every project to find its own (1,661 per submit in the 1 M history
 * bench, 48 buffers of the submit's 134; tests/e2e/bounded-history.test.ts plants 2,000). Against
 * an InitPlan's NULL the test means the same, but no partial index is implied.
 */
export function notDeleted(alias = ''): string {
  if (!/^([a-z_]+\.)?$/.test(alias)) throw new Error(`notDeleted: not an alias: ${alias}`);
  return `${alias}deleted_at IS NOT DISTINCT FROM (SELECT NULL::timestamptz)`;
}

/**
 * Records an upload. Content is unique per project by sha256: a second upload of the same
 * bytes returns the first record (same id, same deadline). A record whose deadline has
 * passed is revived with a new deadline and the caller's storage key, since its object was
 * (or will be) deleted. The caller must then give a key no earlier life of the record used
 * and have written the object there already (uploadStorageKey): the janitor may still be
 * deleting the old key, and a delete sent to object storage can take effect after its sender
 * gave up on it (issue #26), so a revive that reused the key could lose its bytes. Reviving
 * ends the janitor's claim on the row, whose mark then matches nothing (sweepExpired). The
 * facts are the first upload's and never change, so a file's quotes stay the same.
 */
export async function recordUpload(
  db: Knex,
  input: {
    projectId: string;
    sha256: string;
    format: string;
    mimeType: string;
    sizeBytes: number;
    storageKey: string;
    /** Measured at upload; omitted or null: none (quotes take the schema's largest input). */
    facts?: FileFacts | null;
    retentionMs: number;
  },
): Promise<{ file: FileRecord; state: 'created' | 'revived' | 'existing' }> {
  const inserted = await db.raw<{ rows: (FileRow & { created: boolean })[] }>(
    `INSERT INTO files (id, project_id, sha256, format, mime_type, size_bytes, storage_key, facts, expires_at)
     VALUES (:id, :projectId, :sha256, :format, :mimeType, :sizeBytes, :storageKey, CAST(:facts AS jsonb), tes_now() + (:retentionMs::bigint * interval '1 millisecond'))
     ON CONFLICT (project_id, sha256) DO UPDATE
        SET expires_at = excluded.expires_at, deleted_at = NULL, storage_key = excluded.storage_key,
            delete_claim = NULL, delete_claim_until = NULL
      WHERE files.expires_at <= tes_now() OR files.deleted_at IS NOT NULL
     RETURNING ${FILE_COLUMNS.join(', ')}, (xmax = 0) AS created`,
    { id: newId('file'), ...input, facts: input.facts ? JSON.stringify(input.facts) : null },
  );
  // xmax = 0 tells a fresh insert from the conflict update that revived an expired row.
  const row = inserted.rows[0];
  if (row) return { file: toFile(row), state: row.created ? 'created' : 'revived' };
  const existing = await db<FileRow>('files').select(FILE_COLUMNS).where({ project_id: input.projectId, sha256: input.sha256 }).first();
  return { file: toFile(existing!), state: 'existing' };
}

/**
 * The project's record of this content, live or not (an upload decides its storage key by it:
 * uploadStorageKey), or null when there is none.
 */
export async function findUploadBySha(db: Knex, projectId: string, sha256: string): Promise<{ file: FileRecord; live: boolean } | null> {
  const res = await db.raw<{ rows: (FileRow & { live: boolean })[] }>(
    `SELECT ${FILE_COLUMNS.join(', ')}, (deleted_at IS NULL AND expires_at > tes_now()) AS live
       FROM files WHERE project_id = :projectId AND sha256 = :sha256`,
    { projectId, sha256 },
  );
  const row = res.rows[0];
  return row ? { file: toFile(row), live: row.live } : null;
}

/**
 * An input file as a worker reads it for an execution: live, or past its deadline but kept
 * because this execution reads it (the janitor keeps such files until the execution ends).
 */
export async function getExecutionInputFile(db: Knex, projectId: string, executionId: string, id: string): Promise<FileRecord | null> {
  const res = await db.raw<{ rows: FileRow[] }>(
    `SELECT ${FILE_COLUMNS.join(', ')} FROM files f
      WHERE f.id = :id AND f.project_id = :projectId AND ${notDeleted('f.')}
        AND (f.expires_at > tes_now() OR EXISTS (SELECT 1 FROM execution_files ef WHERE ef.execution_id = :executionId AND ef.file_id = f.id))`,
    { id, projectId, executionId },
  );
  return res.rows[0] ? toFile(res.rows[0]) : null;
}

/** A live file of the project, or null (unknown, another project's, expired or deleted). */
export async function getLiveFile(db: Knex, projectId: string, id: string): Promise<FileRecord | null> {
  const res = await db.raw<{ rows: FileRow[] }>(
    `SELECT ${FILE_COLUMNS.join(', ')} FROM files
      WHERE id = :id AND project_id = :projectId AND ${notDeleted()} AND expires_at > tes_now()`,
    { id, projectId },
  );
  return res.rows[0] ? toFile(res.rows[0]) : null;
}
