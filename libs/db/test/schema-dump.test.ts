import fs from 'node:fs';
import path from 'node:path';
import { dumpMigratedSchema, SCHEMA_DUMP_PATH } from '@tes/testing';

/**
 * libs/db/schema.sql is what the migrations make: a reviewer reads today's tables, indexes and
 * triggers there, so it must not drift. After changing a migration, `npm run schema:dump`.
 */
it('the committed schema dump is what the migrations make', async () => {
  const committed = fs.readFileSync(path.join(__dirname, '../../..', SCHEMA_DUMP_PATH), 'utf8');
  const made = await dumpMigratedSchema();
  if (made === committed) return;
  const a = committed.split('\n');
  const b = made.split('\n');
  const at = a.findIndex((line, i) => line !== b[i]);
  const line = at === -1 ? a.length : at;
  throw new Error(
    `${SCHEMA_DUMP_PATH} differs from the migrations from line ${line + 1}:\n` +
      `  committed: ${a[line] ?? '(end of file)'}\n  migrated:  ${b[line] ?? '(end of file)'}\n` +
      'Run `npm run schema:dump` and commit libs/db/schema.sql.',
  );
}, 120_000);
