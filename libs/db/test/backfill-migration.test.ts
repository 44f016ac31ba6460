import { newId } from '@tes/core';
import { recordUpload, submitExecution, publishPrices } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import * as backfill from '../src/migrations/20261123000012_backfill_execution_files';

/**
 * Migration 20261123000012: executions open before execution_files existed get their rows, from
 * any file id in their arguments (nested too), so the janitor keeps those uploads until they end.
 */
const { db } = useTestDatabase({ poolMax: 2 });

it('links the uploads named anywhere in open executions’ arguments, and nothing else', async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const other = await seedProject(db);
  const upload = (projectId: string, sha: string) =>
    recordUpload(db, { projectId, sha256: sha, format: 'png', mimeType: 'image/png', sizeBytes: 1, storageKey: `k/${sha}`, retentionMs: 60_000 });
  const [a, b, foreign] = [
    (await upload(p.projectId, 'a'.repeat(64))).file,
    (await upload(p.projectId, 'b'.repeat(64))).file,
    (await upload(other.projectId, 'c'.repeat(64))).file,
  ];
  const { priceVersion } = await publishPrices(db, { backfill: 1 });
  const submit = async (key: string, args: Record<string, unknown>) => {
    const id = newId('exe');
    await submitExecution(db, {
      id,
      projectId: p.projectId,
      apiKeyId: p.keyId,
      tool: 'video.slideshow',
      model: 'ffmpeg',
      category: 'video',
      arguments: args,
      priceVersion,
      totalSteps: 1,
      reservedMicros: 100,
      idempotencyKey: key,
      requestDigest: 'd',
      dispatchDeadlineMs: 60_000,
    });
    return id;
  };
  const open = await submit('open', { slides: [{ fileId: a.id }, { text: b.id.slice(0, 4) }, { fileId: b.id }], other: foreign.id });
  const ended = await submit('ended', { slides: [{ fileId: a.id }] });
  await db('executions').where({ id: ended }).update({ status: 'failed' }); // (no settle: the ledger is not under test here)
  await db('execution_files').delete(); // as before the table existed
  await backfill.up(db);
  const rows = await db('execution_files').select('execution_id', 'file_id').orderBy('file_id');
  expect(rows).toEqual([a.id, b.id].sort().map((file_id) => ({ execution_id: open, file_id })));
  await backfill.up(db); // idempotent
  expect(await db('execution_files')).toHaveLength(2);
});
