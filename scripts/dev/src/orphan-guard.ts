/**
 * Preloaded into every node process a launcher starts (`node --require orphan-guard.js`):
 * `npm start`'s services, the benchmark's children and the fault suites' services. This is the
 * one copy; the others point at its build (scripts/dev/dist/orphan-guard.js).
 *
 * Children run in process groups of their own, so nothing kills them when the launcher dies
 * without cleaning up (SIGKILL, a crash). Their IPC channel to the launcher closes in that case:
 * treat it as SIGTERM, so the service shuts down as usual and frees its ports. And whatever that
 * shutdown is doing (a render that will not stop, a drain that hangs), the process ends with
 * SIGKILL once SHUTDOWN_TIMEOUT_MS (default 25 s) plus 5 s have passed: an orphan never holds
 * its ports or burns a core for long.
 *
 * Invariant: neither the channel nor the deadline keeps the process alive on its own. Listening
 * for 'disconnect' refs the channel on the next tick, so it is unref'd after that.
 */
if (typeof process.send === 'function') {
  process.once('disconnect', () => {
    const graceful = Number(process.env.SHUTDOWN_TIMEOUT_MS ?? 25_000);
    const hardMs = (Number.isFinite(graceful) && graceful >= 0 ? graceful : 25_000) + 5_000;
    setTimeout(() => process.kill(process.pid, 'SIGKILL'), hardMs).unref();
    process.kill(process.pid, 'SIGTERM');
  });
  setImmediate(() => (process.channel as { unref?: () => void } | undefined)?.unref?.());
}
