/**
 * Preloaded into every node child of the harness (`node --require orphan-guard.js`).
 *
 * Children run in process groups of their own, so a Ctrl-C reaches only the harness, which
 * then stops them in order. If the harness dies without cleaning up (SIGKILL, crash), the
 * IPC channel closes: treat that as SIGTERM, so no server or load loop outlives the run.
 *
 * Invariant: the channel must not keep the child alive on its own, so it is unref'd once
 * the 'disconnect' listener (which refs it) is in place.
 */
if (typeof process.send === 'function') {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  setImmediate(() => (process.channel as { unref?: () => void } | undefined)?.unref?.());
}
