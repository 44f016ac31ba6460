import type { Request, Response } from 'express';
import { isAppError, newId } from '@tes/core';
import { publishPrices, submitExecution } from '@tes/db';
import { createNullLogger } from '@tes/observability';
import type { PresignOptions } from '@tes/storage';
import { seedProject, shiftDatabaseClock, useTestDatabase } from '@tes/testing';
import type { GatewayDeps } from '../src/context';
import { getArtifactDownloadRoute } from '../src/routes/get-artifact-download';

/**
 * An artifact's download is refused as expired, or granted, by the database's clock, the one
 * its expiry was stamped with and the janitor deletes by: not by the gateway's. Here the
 * database's clock is moved against the gateway's (this process's).
 */
const { db } = useTestDatabase({ poolMax: 2 });

it("decides whether an artifact has expired by the database's clock, and signs no URL past its expiry", async () => {
  const p = await seedProject(db, { creditMicros: 10_000 });
  const { priceVersion } = await publishPrices(db, { artifacts: 1 });
  const executionId = newId('exe');
  await submitExecution(db, {
    id: executionId,
    projectId: p.projectId,
    apiKeyId: p.keyId,
    tool: 'test.sleep',
    model: 'sleep',
    category: 'test',
    arguments: { seconds: 0 },
    priceVersion,
    totalSteps: 1,
    reservedMicros: 100,
    idempotencyKey: `k-${executionId}`,
    requestDigest: 'd',
    dispatchDeadlineMs: 60_000,
  });
  /** An artifact expiring `inSql` after the database's now (as the worker stamps it). */
  const artifact = async (inSql: string): Promise<string> => {
    const id = newId('art');
    await db('artifacts').insert({
      id,
      execution_id: executionId,
      project_id: p.projectId,
      step_index: 0,
      format: 'txt',
      mime_type: 'text/plain',
      size_bytes: 1,
      sha256: '0'.repeat(64),
      storage_key: `k/${id}`,
      file_name: `${id}.txt`,
      expires_at: db.raw(`tes_now() + interval '${inSql}'`),
    });
    return id;
  };
  const signed: PresignOptions[] = [];
  const store = {
    presignGet: (o: PresignOptions) => {
      signed.push(o);
      return Promise.resolve({ url: 'https://s3.test/x', expiresAt: new Date(Date.now() + 60_000), ttlSeconds: 60 });
    },
  };
  const route = getArtifactDownloadRoute({ db, store, config: { presignTtlSeconds: 300 }, logger: createNullLogger() } as unknown as GatewayDeps);
  const auth = {
    keyId: p.keyId,
    lookupId: 'unused',
    keyName: 'k',
    projectId: p.projectId,
    organizationId: p.organizationId,
    scopes: ['executions:read'],
    role: 'ADMIN',
  } as const;
  const download = async (artifactId: string): Promise<unknown> => {
    let sent: unknown;
    const res = { json: (body: unknown) => (sent = body), locals: { requestId: 'r' } } as unknown as Response;
    const req = { params: { id: executionId, artifactId } } as unknown as Request;
    try {
      await route.handle({ req, res, auth, body: undefined, query: {} });
      return sent;
    } catch (err) {
      if (isAppError(err)) return err.code;
      throw err;
    }
  };

  // the database's clock two hours behind the gateway's
  await shiftDatabaseClock(db, '-2 hours');
  const live = await artifact('1 hour'); // an hour left by the database's clock: past by the gateway's
  const dead = await artifact('-1 minute');
  expect(await download(dead)).toBe('artifact_expired');
  expect(await download(live)).toMatchObject({ data: { url: 'https://s3.test/x' } });
  // the URL may not outlive the artifact: its limit is the database's hour, carried to this clock
  expect(Math.abs(signed[0]!.notAfter.getTime() - (Date.now() + 3_600_000))).toBeLessThan(60_000);

  // the database's clock two hours ahead: expired by it, with two hours left by the gateway's clock
  await shiftDatabaseClock(db, '2 hours');
  const expired = await artifact('-1 minute');
  expect(await download(expired)).toBe('artifact_expired');
  expect(signed).toHaveLength(1);
});
