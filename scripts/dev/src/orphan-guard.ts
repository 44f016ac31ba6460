/**
 * Preloaded into every service the launcher starts (`node --require orphan-guard.js`).
 *
 * The services run in process groups of their own, so nothing kills them when the launcher
 * dies without cleaning up (SIGKILL, a crash). Their IPC channel to the launcher closes in
 * that case: treat it as SIGTERM, so the service shuts down as usual and frees its ports.
 *
 * Invariant: the channel must not keep the service alive on its own. Listening for
 * 'disconnect' refs the channel on the next tick, so it is unref'd after that.
 */
if (typeof process.send === 'function') {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  setImmediate(() => (process.channel as { unref?: () => void } | undefined)?.unref?.());
}
