import { createLogger, flushLogs, type Logger } from '@tes/observability';
import { ShutdownCoordinator } from './shutdown';
import type { Stoppable } from './stop';

export interface ServiceConfig {
  logLevel: string;
  shutdownTimeoutMs: number;
}

/** Exit codes runService resolves to besides a shutdown's own 0 or 1. */
const EXIT_BAD_CONFIG = 2;
const EXIT_START_FAILED = 1;

/**
 * The body of every service's main.ts: load config (a bad one is written to stderr, every
 * problem listed), start the parts, stop them in order on SIGTERM/SIGINT. Resolves to the
 * code the process should exit with, and main.ts alone exits: 2 for a bad config, 1 when the
 * start failed (the start stops what it had started, see startCleanly), else the shutdown's
 * code, or 130 at once on a second Ctrl-C.
 */
export function runService<C extends ServiceConfig>(
  service: string,
  loadConfig: () => C,
  start: (config: C, logger: Logger) => Promise<{ parts: Stoppable[] }>,
): Promise<number> {
  let config: C;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return Promise.resolve(EXIT_BAD_CONFIG);
  }
  const logger = createLogger({ service, level: config.logLevel });
  const shutdown = new ShutdownCoordinator(logger, config.shutdownTimeoutMs);
  return new Promise<number>((resolve) => {
    // main.ts exits as soon as this resolves: the shutdown's log lines reach stdout first
    const exit = (code: number): void => void flushLogs().then(() => resolve(code));
    // A signal during the start ends the process at once, nothing drained: the parts are
    // registered only once the start has returned them.
    shutdown.installSignalHandlers(exit);
    start(config, logger).then(
      (running) => {
        for (const part of running.parts) shutdown.add(part);
      },
      (err: unknown) => {
        logger.error(`${service}.start_failed`, { err });
        // give the log line a moment to reach stdout before main.ts exits
        setTimeout(() => exit(EXIT_START_FAILED), 50);
      },
    );
  });
}
