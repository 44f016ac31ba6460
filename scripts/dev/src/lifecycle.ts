import { say } from './output';

interface Part {
  name: string;
  stop: () => Promise<void>;
  /** Called on a second Ctrl-C: give up waiting and kill. */
  force?: () => void;
}

/** Thrown by startup steps once a shutdown began; main.ts ignores it. */
export class Stopping extends Error {}

/**
 * The launcher's one shutdown path. Parts are stopped in reverse order of start (services
 * before the S3 and Postgres they use), each once, whatever asked for the stop: a signal,
 * a child that died, or a failed startup step.
 *
 * Invariant: a part added after the shutdown began is stopped at once, so a resource that
 * finishes starting while we are already stopping is never left behind.
 */
export class Lifecycle {
  private readonly parts: Part[] = [];
  private stopping: Promise<number> | undefined;
  private resolveFinished!: (code: number) => void;
  /** Resolves to the exit code once everything has stopped. */
  readonly finished = new Promise<number>((r) => (this.resolveFinished = r));

  get isStopping(): boolean {
    return this.stopping !== undefined;
  }

  /** For startup steps: stop here if a shutdown began meanwhile. */
  check(): void {
    if (this.stopping) throw new Stopping('stopping');
  }

  async add(part: Part): Promise<void> {
    if (this.stopping) {
      await part.stop().catch((err: unknown) => say.error(`stopping ${part.name}: ${(err as Error).message}`));
      throw new Stopping('stopping');
    }
    this.parts.push(part);
  }

  shutdown(reason: string, code: number): Promise<number> {
    if (!this.stopping) {
      this.stopping = this.run(reason, code);
      void this.stopping.then((c) => this.resolveFinished(c));
    }
    return this.stopping;
  }

  private async run(reason: string, code: number): Promise<number> {
    if (this.parts.length > 0) say.info(`stopping (${reason})...`);
    for (const part of [...this.parts].reverse()) {
      try {
        await part.stop();
      } catch (err) {
        say.error(`stopping ${part.name}: ${(err as Error).message}`);
      }
    }
    if (this.parts.length > 0) say.info('stopped.');
    return code;
  }

  /**
   * Ctrl-C, SIGTERM and a closed terminal (SIGHUP) stop everything and exit 0. A second
   * signal while stopping kills the children instead of waiting for them to drain.
   */
  installSignalHandlers(): void {
    let firstAt = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (!this.stopping) {
        firstAt = Date.now();
        void this.shutdown(signal, 0);
        return;
      }
      // Under `npm start` one Ctrl-C can arrive twice (from the terminal and forwarded by
      // npm): only a signal a moment later means "stop waiting".
      if (Date.now() - firstAt < 1_000) return;
      say.warn(`${signal} again: killing what is still running`);
      for (const p of this.parts) p.force?.();
    };
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, onSignal);
  }
}
