import { randomUUID } from 'node:crypto';
import {
  AppError,
  MAX_UPLOAD_BYTES,
  RETENTION_MS,
  bytesMatchFormat,
  CANONICAL_MIME,
  decodeBase64Strict,
  formatForMime,
  sha256Hex,
  ACCEPTED_UPLOAD_MIME_TYPES,
} from '@tes/core';
import { findUploadBySha, recordUpload, type FileRecord } from '@tes/db';
import { probeUpload, uploadKey } from '@tes/storage';
import type { GatewayDeps } from '../context';
import type { KeyRoute } from '../routing/route-spec';
import { UploadSlots } from '../upload-slots';

/** Base64 of 12 MiB plus room for the JSON around it; larger bodies get 413. */
const UPLOAD_BODY_LIMIT_BYTES = Math.ceil(MAX_UPLOAD_BYTES / 3) * 4 + 4 * 1024;
/** Measuring the largest upload takes ~2 s on a busy core; a file slower than this is refused. */
const PROBE_TIMEOUT_MS = 30_000;

/** components.schemas.UploadRequest */
interface UploadBody {
  mimeType: string;
  data: string;
}

/**
 * Stores a file (Base64 in JSON) privately in the project, for tools that take a fileId. Its
 * body is read only once a free upload slot was taken, and the slot is held until the work
 * below ends, even if the client goes away meanwhile (so the slots also bound the ffprobe
 * processes). The file is measured first (FileFacts: what quotes are priced from); bytes that
 * cannot be measured are refused as file_content_mismatch. Without ffprobe on this machine an
 * audio or video file is stored without facts, and its quotes take the schema's largest input.
 */
export function uploadFileRoute(deps: GatewayDeps): KeyRoute<UploadBody> {
  const slots = new UploadSlots(deps.config.uploadConcurrency, {
    minBytesPerSecond: deps.config.uploadMinBytesPerSecond,
    graceMs: 2_000,
    turnMs: deps.config.uploadSlotTurnMs,
    observe: (outcome) => deps.metrics.fairShare.inc({ resource: 'upload', outcome }),
  });
  return {
    method: 'post',
    path: '/tools/upload',
    operationId: 'uploadFile',
    scope: 'tools:execute',
    body: 'upload',
    bodyLimitBytes: UPLOAD_BODY_LIMIT_BYTES,
    admit: slots.take(),
    handle: ({ res, auth, body }) =>
      slots.run(res, async () => {
        const format = formatForMime(body.mimeType);
        if (!format) {
          throw new AppError('unsupported_media_type', 'unsupported_media_type', { details: { accepted: ACCEPTED_UPLOAD_MIME_TYPES } });
        }
        // Size first: a decoded length above the limit is refused before the bytes are decoded.
        if (Math.floor((body.data.length * 3) / 4) - 2 > MAX_UPLOAD_BYTES) {
          throw new AppError('file_too_large', 'file_too_large', { details: { maxBytes: MAX_UPLOAD_BYTES } });
        }
        const bytes = decodeBase64Strict(body.data);
        if (!bytes || bytes.length === 0) throw new AppError('invalid_base64');
        if (bytes.length > MAX_UPLOAD_BYTES) throw new AppError('file_too_large', 'file_too_large', { details: { maxBytes: MAX_UPLOAD_BYTES } });
        if (!bytesMatchFormat(bytes, format)) throw new AppError('file_content_mismatch', 'file_content_mismatch', { details: { declared: format } });
        const probe = await probeUpload(bytes, format, { timeoutMs: PROBE_TIMEOUT_MS });
        if (probe.kind === 'unreadable') {
          throw new AppError('file_content_mismatch', 'file_content_mismatch', { details: { declared: format, reason: probe.reason } });
        }
        if (probe.kind === 'unmeasured') {
          deps.logger.warn('gateway.upload.unmeasured', { requestId: res.locals.requestId as string, projectId: auth.projectId, format, reason: probe.reason });
        }

        const sha256 = sha256Hex(bytes);
        const mimeType = CANONICAL_MIME[format];
        // The same bytes, stored and live: nothing to write.
        const known = await findUploadBySha(deps.db, auth.projectId, sha256);
        let recorded: { file: FileRecord; state: 'created' | 'revived' | 'existing' };
        if (known?.live) recorded = { file: known.file, state: 'existing' };
        else {
          // The object is written before the record, so there is never a record without bytes.
          // A first upload's key is the content's; a record revived after it expired gets a key
          // of its own, since the janitor's delete of the old one may land at any time (even
          // after it gave up waiting for it).
          const key = uploadKey(auth.projectId, sha256, known ? randomUUID() : undefined);
          await deps.store.put({ key, body: bytes, contentType: mimeType });
          recorded = await recordUpload(deps.db, {
            projectId: auth.projectId,
            sha256,
            format,
            mimeType,
            sizeBytes: bytes.length,
            storageKey: key,
            facts: probe.kind === 'facts' ? probe.facts : null,
            retentionMs: RETENTION_MS,
          });
          // a concurrent upload of the same bytes recorded them first, under another key: ours is spare
          if (recorded.file.storageKey !== key) {
            await deps.store.delete(key).catch((err: unknown) => {
              deps.logger.warn('gateway.upload.spare_object_left', { requestId: res.locals.requestId as string, key, err: (err as Error).message });
            });
          }
        }
        const { file, state } = recorded;
        deps.logger.info('gateway.upload.stored', {
          requestId: res.locals.requestId as string,
          projectId: auth.projectId,
          fileId: file.id,
          format,
          sizeBytes: bytes.length,
          state,
        });
        res.status(200).json({
          data: {
            id: file.id,
            format: file.format,
            mimeType: file.mimeType,
            sizeBytes: file.sizeBytes,
            sha256: file.sha256,
            facts: file.facts,
            expiresAt: file.expiresAt,
          },
        });
      }),
  };
}
