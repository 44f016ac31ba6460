// `npm run schema:dump`: writes libs/db/schema.sql, the schema a database migrated from empty
// has today (pg_dump --schema-only, normalized). libs/db/test/schema-dump.test.ts fails while
// the committed file and the migrations differ. Runs the built libs (the script builds first).
const fs = require('node:fs');
const path = require('node:path');
const { dumpMigratedSchema, SCHEMA_DUMP_PATH } = require('@tes/testing');

dumpMigratedSchema().then(
  (text) => {
    fs.writeFileSync(path.join(__dirname, '..', SCHEMA_DUMP_PATH), text);
    process.stdout.write(`${SCHEMA_DUMP_PATH}: ${text.split('\n').length} lines\n`);
  },
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
