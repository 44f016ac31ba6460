import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { publishPrices } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import { commands } from './ledger-model/commands';
import { checkLiveness } from './ledger-model/liveness';
import { mixedVersionCommands } from './ledger-model/mixed-versions';
import { INITIAL_CAPS, INITIAL_CREDIT, setClock, stats, type Model, type Real } from './ledger-model/model';

/*
 * The ledger model of ledger-model.test.ts with old releases' writers mixed in (issue #26): the
 * previous release's worker and an older release's submit and worker (ledger-model/mixed-versions.ts)
 * interleaved with the new code's commands, on the newest schema, as during a rolling deploy or
 * after a rollback of the images. After every command the database must agree with the model,
 * auditLedger must be ok, and at the end every accepted execution must end (liveness). A migration
 * that made an old writer's rows unsafe (no deadline, no linked uploads, steps a later claim does
 * not see) fails here. Replay a failure as for ledger-model.test.ts, with LEDGER_MIXED_* variables.
 */

const { db } = useTestDatabase({ poolMax: 4 });

test('old and new writers together: the ledger agrees with the model after every command, and every execution ends', async () => {
  const seed = Number(process.env.LEDGER_MIXED_SEED ?? Date.now() % 2 ** 31);
  const path = process.env.LEDGER_MIXED_PATH;
  const replayPath = process.env.LEDGER_MIXED_REPLAY;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.commands([...commands, ...mixedVersionCommands], { maxCommands: 50, size: 'max', ...(replayPath ? { replayPath } : {}) }),
      async (cmds) => {
        runs += 1;
        let real: Real | undefined;
        let model: Model | undefined;
        const setup = async () => {
          await setClock(db, 0);
          const seeded = await Promise.all(INITIAL_CAPS.map((cap) => seedProject(db, { creditMicros: INITIAL_CREDIT, monthlyCapMicros: cap })));
          model = {
            projects: INITIAL_CAPS.map((cap) => ({ available: INITIAL_CREDIT, reserved: 0, capMonth: null, monthCharged: 0, cap, usage: new Map() })),
            execs: [],
            files: [],
            seq: 0,
            clock: 0,
            prices: [(await publishPrices(db, { model: 0, run: randomBytes(4).toString('hex') })).priceVersion],
          };
          real = { db, projectIds: seeded.map((s) => s.projectId), keyIds: seeded.map((s) => s.keyId) };
          return { model, real };
        };
        await fc.asyncModelRun(setup, cmds);
        await checkLiveness(real!, model!.clock);
      },
    ),
    { numRuns: Number(process.env.LEDGER_MIXED_RUNS ?? 60), seed, ...(path ? { path } : {}) },
  );
  const mixed = [...stats.hits].filter(([k]) => k.startsWith('older.') || k.startsWith('previous.'));
  console.log(
    `ledger model, mixed versions: ${runs} runs, ${stats.commandsRun} commands checked, seed ${seed}\n${JSON.stringify(Object.fromEntries(mixed.sort()))}`,
  );
}, 240_000);
