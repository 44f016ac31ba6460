import { createLogger, type Logger } from './logger';
import { ShutdownCoordinator, type Stoppable } from './shutdown';

export interface ServiceConfig {
  logLevel: string;
  shutdownTimeoutMs: number;
}

/**
 * The body of every service's main.ts: load config (a bad one exits 2 with every problem
 * listed), start the parts, stop them in order on SIGTERM/SIGINT, exit 1 if start fails.
 */
export async function runService<C extends ServiceConfig>(
  service: string,
  loadConfig: () => C,
  start: (config: C, logger: Logger) => Promise<{ parts: Stoppable[] }>,
): Promise<void> {
  let config: C;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger({ service, level: config.logLevel });
  const shutdown = new ShutdownCoordinator(logger, config.shutdownTimeoutMs);
  shutdown.installSignalHandlers((code) => process.exit(code));
  try {
    const running = await start(config, logger);
    for (const part of running.parts) shutdown.add(part);
  } catch (err) {
    logger.error(`${service}.start_failed`, { err });
    // give the log line a moment to reach stdout
    setTimeout(() => process.exit(1), 50);
  }
}
