import type { Logger } from '@tes/observability';
import { stopInOrder, type Stoppable } from './stop';

/**
 * One per process: on SIGTERM/SIGINT stops the parts in the order given (intake first,
 * then in-flight work, then AMQP, then the database pool), each bounded by the deadline.
 * Only main.ts calls process.exit, with the code this resolves to.
 */
export class ShutdownCoordinator {
  private parts: Stoppable[] = [];
  private stopping: Promise<number> | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly deadlineMs: number,
  ) {}

  add(part: Stoppable): void {
    this.parts.push(part);
  }

  /** Stops every part once; later calls return the same promise. Resolves to an exit code. */
  shutdown(reason: string): Promise<number> {
    this.stopping ??= this.run(reason);
    return this.stopping;
  }

  private async run(reason: string): Promise<number> {
    this.logger.info('process.shutdown.begin', { reason, deadlineMs: this.deadlineMs });
    const clean = await stopInOrder(this.parts, this.deadlineMs, (part, err) => this.logger.error('process.shutdown.part_failed', { part, err }));
    const code = clean ? 0 : 1;
    this.logger.info('process.shutdown.done', { reason, code });
    return code;
  }

  /**
   * Wire SIGTERM and SIGINT; `exit` receives the code the process should end with (main.ts
   * calls process.exit with it). A signal that arrives while stopping (a supervisor and a
   * terminal both signalling, a gateway process told by its primary and by Ctrl-C) joins the
   * stop under way: with no listener left, node's default action would kill the process in
   * the middle of draining. A second Ctrl-C (SIGINT) asks to exit at once, with 130.
   * Returns a function that removes the handlers.
   */
  installSignalHandlers(exit: (code: number) => void): () => void {
    let interrupted = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.stopping) {
        // Ctrl-C twice: the person at the terminal does not want to wait for the drain
        if (signal === 'SIGINT' && interrupted) {
          this.logger.warn('process.shutdown.forced', { signal });
          exit(130);
          return;
        }
        interrupted ||= signal === 'SIGINT';
        this.logger.info('process.shutdown.signal_joined', { signal, reason: 'already stopping' });
        return;
      }
      interrupted = signal === 'SIGINT';
      void this.shutdown(signal).then(exit);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    return () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    };
  }
}
