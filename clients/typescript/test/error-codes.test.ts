import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ERROR_TABLE } from '@tes/core';
import { errorFromResponse } from '../src/errors';
import { ERROR_CODE_FILES, renderErrorCodeFiles } from '../scripts/generate-error-codes';

const ROOT = join(__dirname, '../../..');

/**
 * The error codes have one owner, libs/core's ERROR_TABLE; the SDK's, the Python client's and
 * the console's copies are generated from it by `npm run generate:errors` and committed (like
 * src/tool-types.ts). A code added, removed or reworded in core without a regeneration fails here.
 */
it.each(Object.entries(renderErrorCodeFiles()))('%s is what `npm run generate:errors` writes from libs/core', async (path, fresh) => {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(pkg.scripts['generate:errors']).toContain('clients/typescript/scripts/dist/generate-error-codes.js');
  const committed = await readFile(join(ROOT, path), 'utf8');
  if (committed !== fresh) {
    let at = 0;
    while (committed[at] === fresh[at]) at++;
    const line = committed.slice(0, at).split('\n').length;
    throw new Error(
      `${path} disagrees with libs/core's ERROR_TABLE (from line ${line} on): run \`npm run generate:errors\` at the repository root and commit it`,
    );
  }
});

it('a code added to the table reaches every generated file', () => {
  const files = renderErrorCodeFiles({ ...ERROR_TABLE, brand_new_code: { http: 418, status: 'INTERNAL', retryable: false, description: 'A test code.' } });
  for (const path of Object.values(ERROR_CODE_FILES)) expect(files[path]).toContain('brand_new_code');
});

/**
 * The table's `retryable` is the SDK's resend policy (src/http.ts): a 429 rate_limit_exceeded
 * after its Retry-After, and a 5xx other than execution_disabled; nothing else is sent again.
 */
it.each(Object.entries(ERROR_TABLE))('%s: the SDK resends it exactly when the table says it is retryable', (code, facts) => {
  const err = errorFromResponse(facts.http, { error: { status: facts.status, message: code } }, new Headers());
  expect(err.retryable || code === 'rate_limit_exceeded').toBe(facts.retryable);
});
