/**
 * Preloaded into every service the fault harness starts (`node --require`), which gives
 * them an IPC channel to the test process. If the test process dies without cleaning up
 * (jest killed, a crash), the channel closes: the service then stops as on SIGTERM instead
 * of running on with a dropped database. The channel is unref'd so it never keeps the
 * service alive by itself. (Same idea as scripts/dev's guard, kept here so the suite needs
 * no build of the dev launcher.)
 */
if (typeof process.send === 'function') {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  setImmediate(() => process.channel && process.channel.unref && process.channel.unref());
}
