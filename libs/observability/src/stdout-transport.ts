import SonicBoom from 'sonic-boom';
import Transport from 'winston-transport';

const MESSAGE = Symbol.for('message');

/** A turn's lines are handed to sonic-boom at the latest when they reach this many characters. */
const MAX_BATCH_CHARS = 64 * 1024;

/** Bytes of log text waiting for a blocked stdout before lines are dropped (and counted). */
const STDOUT_MAX_PENDING_BYTES = 8 * 1024 * 1024;

/**
 * stdout as one non-blocking destination per process: fd 1 is a process-wide resource, so
 * every logger of the process shares it (two buffers on one fd would interleave and each
 * need its own flush at exit). Created on the first line, so a process that logs nothing
 * (a silent test logger) opens nothing and adds no exit listener.
 *
 * sonic-boom writes with fs.write on fd 1 (pino's destination): no stream machinery and no
 * per-line setImmediate as in winston's Console transport. While a write is in flight, new
 * text waits in its buffer; past `maxLength` it refuses the text ('drop') instead of growing,
 * so a stdout nobody reads costs at most STDOUT_MAX_PENDING_BYTES of memory.
 */
class StdoutDestination {
  private readonly boom: SonicBoom;
  private batch = '';
  private batchLines = 0;
  private scheduled = false;
  private droppedLines = 0;
  private refused = false;

  constructor(
    maxPendingBytes: number,
    /** The `service` of the notice about dropped lines: the process's (its first logger's). */
    private readonly service: string,
  ) {
    this.boom = new SonicBoom({ fd: 1, sync: false, maxLength: maxPendingBytes });
    // sonic-boom emits 'drop' synchronously inside write() when the text would pass maxLength
    this.boom.on('drop', () => {
      this.refused = true;
    });
    // a failed stdout (EPIPE: the reader is gone) must not crash the service; nothing can be logged
    this.boom.on('error', () => undefined);
    // Lines still pending when the process exits are written synchronously. A service's
    // runService awaits flushLogs() before main.ts exits; this catches every other exit (a
    // crash, a script) except a write already in flight on the thread pool at that moment.
    process.once('exit', () => this.flushSync());
  }

  /** Queues one whole line (ending in a newline); the turn's lines are written together. */
  append(line: string): void {
    this.batch += line;
    this.batchLines++;
    // a turn that logs a lot hands its lines over in slices, so the batch itself stays small
    if (this.batch.length >= MAX_BATCH_CHARS) this.flushTurn();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushTurn);
    }
  }

  /** Hands the turn's lines to sonic-boom in one write; refused (stdout blocked past the bound): counted. */
  readonly flushTurn = (): void => {
    this.scheduled = false;
    if (this.batchLines === 0) return;
    const lost = this.droppedLines;
    // stdout moved again: say how many lines were lost, before the lines that follow
    const text = lost > 0 ? droppedNotice(this.service, lost) + this.batch : this.batch;
    const lines = this.batchLines;
    this.batch = '';
    this.batchLines = 0;
    this.refused = false;
    this.boom.write(text);
    this.droppedLines = this.refused ? lost + lines : 0;
  };

  /** Resolves once every line so far reached stdout (false when `timeoutMs` passed first). */
  flush(timeoutMs: number): Promise<boolean> {
    this.flushTurn();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      this.boom.flush(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /** Writes everything pending now, blocking until stdout took it (the process is exiting). */
  flushSync(): void {
    try {
      // first what sonic-boom holds, so the turn's lines fit under the bound and keep their order
      this.boom.flushSync();
      this.flushTurn();
      if (this.droppedLines > 0) {
        this.boom.write(droppedNotice(this.service, this.droppedLines));
        this.droppedLines = 0;
      }
      this.boom.flushSync();
    } catch {
      // stdout closed: nothing more can be done at exit
    }
  }
}

/** The warning line for dropped lines, in the logger's own shape (keys sorted, as winston's json format writes them). */
function droppedNotice(service: string, lines: number): string {
  const notice = {
    droppedLines: lines,
    level: 'warn',
    message: 'logger.lines_dropped',
    reason: 'stdout blocked',
    service,
    timestamp: new Date().toISOString(),
  };
  return `${JSON.stringify(notice)}\n`;
}

let shared: StdoutDestination | undefined;

function stdoutDestination(service: string): StdoutDestination {
  shared ??= new StdoutDestination(STDOUT_MAX_PENDING_BYTES, service);
  return shared;
}

/**
 * The default transport: each formatted record as one JSON line on stdout, the lines of one
 * event-loop turn joined and written once when the turn's I/O callbacks are done
 * (setImmediate), instead of winston Console's write and setImmediate per line. A gateway
 * under load logs a line per request; this costs one write per turn, not one per line.
 *
 * Nothing waits on stdout: if it is blocked, lines wait in the destination's bounded buffer
 * and beyond its bound are dropped and counted; the count is logged (`logger.lines_dropped`)
 * once stdout moves again. At exit, what is buffered is written synchronously.
 */
class StdoutTransport extends Transport {
  constructor(private readonly service: string) {
    super();
  }

  override log(info: Record<string | symbol, unknown>, next: () => void): void {
    stdoutDestination(this.service).append(`${info[MESSAGE] as string}\n`);
    next();
  }

  override close(): void {
    shared?.flushSync();
  }
}

/** The default transport of createLogger (see StdoutTransport). */
export function stdoutTransport(service: string): Transport {
  return new StdoutTransport(service);
}

/**
 * Resolves once every line logged so far through the default transport has been written to
 * stdout, or after `timeoutMs` (a stdout nobody reads must not hold the exit forever). Called
 * before the process exits: process.exit would cut short a write still in progress.
 */
export function flushLogs(timeoutMs = 2_000): Promise<boolean> {
  return shared ? shared.flush(timeoutMs) : Promise.resolve(true);
}
