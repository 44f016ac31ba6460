#!/usr/bin/env node
// The `tes` command: the compiled CLI in dist/. A file of its own, kept executable in git,
// because tsc writes dist/cli.js without the executable bit, so a binary pointing there
// would fail with "Permission denied" after every fresh build.
import('../dist/cli.js').catch((err) => {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND') {
    process.stderr.write('tes: the CLI is not built yet: run `npm run build` (in this repository) and try again\n');
  } else {
    process.stderr.write(`tes: ${err && err.stack ? err.stack : String(err)}\n`);
  }
  process.exitCode = 1;
});
