import type { NextFunction, Request, Response } from 'express';
import { AppError } from '@tes/core';
import { markRefusal } from './access-log';

/**
 * At most `max` uploads are read and processed at once in this process: each holds its body
 * as a buffer, a string and the parsed copy (≈ 4 × 16 MiB at the limit), so unbounded
 * concurrency would let a burst of uploads exhaust the heap. One more gets 503
 * service_unavailable with Retry-After before its body is read.
 *
 * Fair: one project holds at most `perProject` of them (half, at least one), so one caller's
 * uploads never take every slot from everyone else; and a body that arrives slower than
 * `minBytesPerSecond` (after a short grace) is cut with 400 and its connection closed, so
 * trickled bodies cannot hold slots for long.
 */
export class UploadSlots {
  private inUse = 0;
  private readonly byProject = new Map<string, number>();
  readonly perProject: number;

  constructor(
    readonly max: number,
    private readonly slowBody: { minBytesPerSecond: number; graceMs: number; checkEveryMs?: number } = { minBytesPerSecond: 0, graceMs: 0 },
  ) {
    this.perProject = Math.max(1, Math.floor(max / 2));
  }

  get busy(): number {
    return this.inUse;
  }

  /**
   * Takes a slot before the body is read. It is given back when the handler's work ends
   * (`run`), or, if the handler never starts (the body could not be read or parsed), when
   * the response ends or the connection closes. A client that disconnects while its upload
   * is processed does not free the slot early: the memory is still held until `run` returns.
   */
  take() {
    return (req: Request, res: Response, next: NextFunction): void => {
      const project = (res.locals.auth as { projectId?: string } | undefined)?.projectId ?? '';
      const mine = this.byProject.get(project) ?? 0;
      if (this.inUse >= this.max || mine >= this.perProject) {
        const reason = mine >= this.perProject ? `this project already has ${mine} upload(s) in progress` : 'too many uploads in progress';
        // the clients' load, not a failure: logged at warn
        markRefusal(res);
        throw new AppError('service_unavailable', 'service_unavailable', { retryable: true, details: { reason: `${reason}; retry shortly` } });
      }
      this.inUse += 1;
      this.byProject.set(project, mine + 1);
      const slot = { running: false, released: false };
      const stopWatching = this.watchBodyRate(req, res);
      const release = () => {
        if (slot.released) return;
        slot.released = true;
        stopWatching();
        this.inUse -= 1;
        const n = (this.byProject.get(project) ?? 1) - 1;
        if (n > 0) this.byProject.set(project, n);
        else this.byProject.delete(project);
      };
      res.locals.uploadSlot = { slot, release };
      const ifNotRunning = () => {
        if (!slot.running) release();
      };
      res.once('finish', ifNotRunning);
      res.once('close', ifNotRunning);
      next();
    };
  }

  /** Runs the handler's work holding the request's slot, and gives the slot back after it. */
  async run<T>(res: Response, work: () => Promise<T>): Promise<T> {
    const held = res.locals.uploadSlot as { slot: { running: boolean }; release: () => void } | undefined;
    if (held) held.slot.running = true;
    try {
      return await work();
    } finally {
      held?.release();
    }
  }

  /**
   * Cuts a body that arrives too slowly. Reads the socket's byte counter (a 'data' listener
   * would steal the body from the parser); once the body is complete it stops watching.
   */
  private watchBodyRate(req: Request, res: Response): () => void {
    const { minBytesPerSecond, graceMs, checkEveryMs = 500 } = this.slowBody;
    const socket = req.socket as Request['socket'] | undefined;
    if (!socket || minBytesPerSecond <= 0) return () => undefined;
    const started = Date.now();
    const startBytes = socket.bytesRead;
    const timer = setInterval(() => {
      if (req.complete) return clearInterval(timer);
      const elapsedMs = Date.now() - started;
      if (elapsedMs < graceMs) return;
      const rate = ((socket.bytesRead - startBytes) * 1000) / elapsedMs;
      if (rate >= minBytesPerSecond) return;
      clearInterval(timer);
      if (!res.headersSent) {
        res
          .status(400)
          .set({ Connection: 'close', 'Cache-Control': 'no-store' })
          .json({
            error: {
              status: 'INVALID_ARGUMENT',
              message: 'invalid_request',
              details: { reason: `the upload body arrived slower than ${minBytesPerSecond} bytes/s` },
            },
          });
      }
      // the parser is still waiting on the body: end the connection once the answer is out
      res.once('finish', () => socket.destroy());
      setTimeout(() => socket.destroy(), 1_000).unref();
    }, checkEveryMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}
