import { auditLedger } from '@tes/db';
import { ObjectStore } from '@tes/storage';
import { seedProject, startEmbeddedS3, useTestDatabase } from '@tes/testing';
import { FakeProvider, modelEngine, modelPrices, submitModel } from './engine-model/tool';

/**
 * A statement a step runs itself (here recordExternalRef, right after the provider's create) that
 * the worker's lock or statement timeout rolled back is no failure of the step: the provider job
 * exists and bills. Before, the step ended failed (internal_error, charged 0) and the job was
 * never looked at again. Now the execution is given back without spending an attempt, and the
 * next claim finds a provider step with no recorded reference: an operator decides
 * (needs_review, the reservation held), as after any crash at that point.
 */
const { db } = useTestDatabase({ poolMax: 4 });

it.each([
  ['waits past its lock timeout', '55P03'],
  ['runs past its statement timeout', '57014'],
])(
  'a step whose own statement %s gives its execution back, and the next claim hands it to an operator',
  async (_what, sqlstate) => {
    const s3 = await startEmbeddedS3();
    const store = new ObjectStore({
      endpoint: s3.endpoint,
      publicEndpoint: s3.endpoint,
      bucket: 'step-rolled-back',
      region: 'us-east-1',
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    });
    const provider = new FakeProvider();
    const resent: string[] = [];
    const engine = modelEngine({ db: db, store, provider, workerId: 'wrk_rolled_back', resent });
    try {
      await store.ensureBucket();
      const p = await seedProject(db, { creditMicros: 100_000 });
      const id = await submitModel(db, p, await modelPrices(db), { steps: [{ ms: 0, file: false, external: true }] });
      // Postgres answers the recording of this execution's provider reference with the timeout
      await db.raw(`CREATE FUNCTION test_timeout() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '${sqlstate}'; END $$`);
      await db.raw(
        `CREATE TRIGGER test_timeout BEFORE UPDATE ON execution_steps FOR EACH ROW
        WHEN (NEW.execution_id = '${id}' AND NEW.external_ref IS NOT NULL) EXECUTE FUNCTION test_timeout()`,
      );
      // before the fix: 'ack' with the execution failed, internal_error, charged 0, its job forgotten
      expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
      expect(await db('executions').where({ id }).first('status', 'lease_owner', 'attempts', 'error_code')).toEqual({
        status: 'running',
        lease_owner: null,
        attempts: 0,
        error_code: null,
      });
      expect(resent).toEqual([id]);
      expect([...provider.creates.values()]).toEqual([1]);
      await db.raw('DROP TRIGGER test_timeout ON execution_steps');
      // the job was created and its reference is unknown: never sent again, an operator decides
      expect(await engine.handle({ executionId: id, projectId: p.projectId }, 'test')).toBe('ack');
      expect(await db('executions').where({ id }).first('status', 'error_code', 'charged_micros')).toEqual({
        status: 'needs_review',
        error_code: 'provider_outcome_unknown',
        charged_micros: 0,
      });
      expect([...provider.creates.values()]).toEqual([1]);
      expect((await auditLedger(db)).ok).toBe(true);
    } finally {
      await db.raw('DROP TRIGGER IF EXISTS test_timeout ON execution_steps');
      await db.raw('DROP FUNCTION IF EXISTS test_timeout()');
      await engine.sandbox.stop();
      store.close();
      await s3.stop();
    }
  },
  60_000,
);
