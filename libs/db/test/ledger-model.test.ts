import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { publishPrices } from '@tes/db';
import { seedProject, useTestDatabase } from '@tes/testing';
import { commands } from './ledger-model/commands';
import { checkLiveness } from './ledger-model/liveness';
import { INITIAL_CAPS, INITIAL_CREDIT, setClock, stats, type Model, type Real } from './ledger-model/model';

/*
 * Model-based test of the money and work SQL (libs/db/src/executions/, outbox.ts, janitor.ts,
 * files.ts, accounts.ts): random command sequences run against the real repository functions on
 * a real database and against a small in-memory model; after every command the balances, the
 * month's cap counter and usage, statuses, charges, leases and their deadlines, claims and
 * attempts, steps, outbox rows and deleted uploads must agree, and auditLedger must be ok.
 *
 * The database's clock is the model's: tes_now() is redefined to a frozen instant that only the
 * advanceClock command moves, starting five minutes before a UTC month ends, so deadlines,
 * expiries and the month of the cap are exact and a month boundary is crossed in most runs.
 *
 * After each sequence, liveness: every message in flight is lost (a purged broker), then time
 * passes in steps and the relay's passes run, with a worker that finishes whatever it is handed.
 * Every accepted execution must end (terminal, or needs_review for an operator).
 *
 * A failure shrinks and fast-check prints `seed`, `path` and the counterexample's replayPath;
 * replay it with LEDGER_MODEL_SEED=<seed> LEDGER_MODEL_PATH=<path> LEDGER_MODEL_REPLAY=<replayPath>.
 *
 * The model and its rules are in ledger-model/model.ts, the comparison in compare.ts, the
 * commands in commands.ts and the liveness check in liveness.ts.
 */

const { db } = useTestDatabase({ poolMax: 4 });

test('the ledger agrees with a model of balances, leases and uploads after every command, and every execution ends', async () => {
  const seed = Number(process.env.LEDGER_MODEL_SEED ?? Date.now() % 2 ** 31);
  const path = process.env.LEDGER_MODEL_PATH;
  const replayPath = process.env.LEDGER_MODEL_REPLAY; // the counterexample's /*replayPath="..."*/
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 50, size: 'max', ...(replayPath ? { replayPath } : {}) }), async (cmds) => {
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
    }),
    { numRuns: Number(process.env.LEDGER_MODEL_RUNS ?? 120), seed, ...(path ? { path } : {}) },
  );
  console.log(`ledger model: ${runs} runs, ${stats.commandsRun} commands checked, seed ${seed}\n${JSON.stringify(Object.fromEntries([...stats.hits].sort()))}`);
}, 240_000);
