#!/usr/bin/env node
import { main } from './cli/main';

/**
 * The `tes` binary. Ctrl-C stops waiting for an execution (it goes on on the server and
 * the message names it); a second Ctrl-C exits at once.
 */
const controller = new AbortController();
const onSigint = (): void => {
  if (controller.signal.aborted) process.exit(130);
  controller.abort(new Error('interrupted'));
};
process.on('SIGINT', onSigint);

void main(process.argv.slice(2), process.env, { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, signal: controller.signal })
  .then((code) => {
    process.exitCode = code;
  })
  .finally(() => process.off('SIGINT', onSigint));
