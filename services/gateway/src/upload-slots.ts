import type { NextFunction, Request, Response } from 'express';
import { AppError } from '@tes/core';
import { markError, markRefusal } from './access-log';

interface SlotOptions {
  /** A body slower than this after `graceMs` is cut with 400 (0: never). */
  minBytesPerSecond: number;
  graceMs: number;
  checkEveryMs?: number;
  /**
   * How long an upload whose body is still arriving keeps its slot against a project with no
   * upload in flight (Infinity: always).
   */
  turnMs?: number;
  /** Told of each refusal and each upload cut for a waiting project (the gateway counts them: tes_fair_share_total). */
  observe?: (outcome: 'refused' | 'preempted') => void;
}

interface Slot {
  projectId: string;
  organizationId: string;
  since: number;
  /** The handler holds the parsed body (run): the memory is in use, the slot cannot be taken. */
  running: boolean;
  released: boolean;
  req: Request;
  res: Response;
  release: () => void;
}

/**
 * At most `max` uploads are read and processed at once in this process: each holds its body
 * as a buffer, a string and the parsed copy (≈ 4 × 16 MiB at the limit), so unbounded
 * concurrency would let a burst of uploads exhaust the heap. One more gets 503
 * service_unavailable with Retry-After before its body is read.
 *
 * Fair, by project and by organization (issue #25: two projects of one organization, each
 * trickling a body just above the speed floor, held both slots and every other project got
 * 503 for as long as they liked; a 16 MiB body at 40 KiB/s takes 6.8 minutes):
 *  - one project holds at most `perProject` slots and the projects of one organization together
 *    at most `perOrganization` (each half of `max`, at least one), so one organization never
 *    takes every slot;
 *  - a project with no upload in flight that finds every slot taken gets one all the same once
 *    the longest-held upload whose body is still arriving has had its turn (`turnMs`): that
 *    upload is cut with 503 and Retry-After and its slot is given to the waiting project (which
 *    is told in its own Retry-After when the next turn ends). Uploads being processed are never
 *    cut: their memory is in use until they end, which the probe's deadline bounds. So no set of
 *    projects can deny another a slot for longer than a turn, however many organizations they
 *    span, while an upload that arrives within its turn is never cut;
 *  - a body that arrives slower than `minBytesPerSecond` (after a short grace) is cut with 400
 *    and its connection closed, so a slot held without contention is not held by a stalled body.
 */
export class UploadSlots {
  private readonly slots = new Set<Slot>();
  private readonly byProject = new Map<string, number>();
  private readonly byOrganization = new Map<string, number>();
  readonly perProject: number;
  readonly perOrganization: number;
  private readonly turnMs: number;

  constructor(
    readonly max: number,
    private readonly slowBody: SlotOptions = { minBytesPerSecond: 0, graceMs: 0 },
  ) {
    this.perProject = Math.max(1, Math.floor(max / 2));
    this.perOrganization = this.perProject;
    this.turnMs = slowBody.turnMs ?? Infinity;
  }

  get busy(): number {
    return this.slots.size;
  }

  /**
   * Takes a slot before the body is read. It is given back when the handler's work ends
   * (`run`), or, if the handler never starts (the body could not be read or parsed), when
   * the response ends or the connection closes. A client that disconnects while its upload
   * is processed does not free the slot early: the memory is still held until `run` returns.
   */
  take() {
    return (req: Request, res: Response, next: NextFunction): void => {
      const auth = res.locals.auth as { projectId?: string; organizationId?: string } | undefined;
      const projectId = auth?.projectId ?? '';
      const organizationId = auth?.organizationId ?? '';
      const mine = this.byProject.get(projectId) ?? 0;
      const ours = this.byOrganization.get(organizationId) ?? 0;
      if (mine >= this.perProject) this.refuse(res, `this project already has ${mine} upload(s) in progress`);
      if (ours >= this.perOrganization) this.refuse(res, `this project's organization already has ${ours} upload(s) in progress`);
      if (this.slots.size >= this.max) {
        const now = Date.now();
        const victim = mine === 0 ? this.turnOver(now) : undefined;
        if (!victim) {
          const nextTurnMs = mine === 0 ? this.nextTurnEndsInMs(now) : undefined;
          if (nextTurnMs !== undefined) res.set('Retry-After', String(Math.max(1, Math.ceil(nextTurnMs / 1000))));
          this.refuse(res, 'too many uploads in progress');
        }
        this.preempt(victim, now);
      }
      this.hold(req, res, projectId, organizationId);
      next();
    };
  }

  /** Runs the handler's work holding the request's slot, and gives the slot back after it. */
  async run<T>(res: Response, work: () => Promise<T>): Promise<T> {
    const held = res.locals.uploadSlot as Slot | undefined;
    if (held) held.running = true;
    try {
      return await work();
    } finally {
      held?.release();
    }
  }

  private refuse(res: Response, reason: string): never {
    this.slowBody.observe?.('refused');
    // the clients' load, not a failure: logged at warn
    markRefusal(res);
    throw new AppError('service_unavailable', 'service_unavailable', { retryable: true, details: { reason: `${reason}; retry shortly` } });
  }

  private hold(req: Request, res: Response, projectId: string, organizationId: string): void {
    const stopWatching = this.watchBodyRate(req, res);
    const slot: Slot = {
      projectId,
      organizationId,
      since: Date.now(),
      running: false,
      released: false,
      req,
      res,
      release: () => {
        if (slot.released) return;
        slot.released = true;
        stopWatching();
        this.slots.delete(slot);
        count(this.byProject, projectId, -1);
        count(this.byOrganization, organizationId, -1);
      },
    };
    this.slots.add(slot);
    count(this.byProject, projectId, 1);
    count(this.byOrganization, organizationId, 1);
    res.locals.uploadSlot = slot;
    const ifNotRunning = () => {
      if (!slot.running) slot.release();
    };
    res.once('finish', ifNotRunning);
    res.once('close', ifNotRunning);
  }

  /** Whether a slot's body is still arriving (nothing parsed yet: cutting it frees its memory). */
  private reading(slot: Slot): boolean {
    return !slot.running && !slot.released && !slot.req.complete;
  }

  /** The longest-held upload still reading its body whose turn is over. A Set iterates oldest first. */
  private turnOver(now: number): Slot | undefined {
    for (const slot of this.slots) if (this.reading(slot) && now - slot.since >= this.turnMs) return slot;
    return undefined;
  }

  /** When the first turn of an upload still reading its body ends; undefined if none is. */
  private nextTurnEndsInMs(now: number): number | undefined {
    if (!Number.isFinite(this.turnMs)) return undefined;
    for (const slot of this.slots) if (this.reading(slot)) return slot.since + this.turnMs - now;
    return undefined;
  }

  /** Cuts an upload whose turn is over: its slot is free at once, its client told to retry. */
  private preempt(slot: Slot, now: number): void {
    slot.release();
    this.slowBody.observe?.('preempted');
    markRefusal(slot.res);
    markError(slot.res, 'service_unavailable');
    const heldSeconds = Math.round((now - slot.since) / 1000);
    cutConnection(slot.req, slot.res, 503, {
      status: 'UNAVAILABLE',
      message: 'service_unavailable',
      details: {
        reason: `this upload's body was still arriving after ${heldSeconds} s while another project waited for its slot; retry shortly, or send it faster`,
      },
      retryAfterSeconds: 2,
    });
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
      cutConnection(req, res, 400, {
        status: 'INVALID_ARGUMENT',
        message: 'invalid_request',
        details: { reason: `the upload body arrived slower than ${minBytesPerSecond} bytes/s` },
      });
    }, checkEveryMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}

/**
 * Answers a request whose body is still arriving with the error envelope and closes its
 * connection: the parser is still waiting on the body, so it ends once the answer is out.
 */
function cutConnection(
  req: Request,
  res: Response,
  http: number,
  error: { status: string; message: string; details: Record<string, unknown>; retryAfterSeconds?: number },
): void {
  const { retryAfterSeconds, ...envelope } = error;
  const socket = req.socket as Request['socket'] | undefined;
  if (!res.headersSent) {
    res.status(http).set({ Connection: 'close', 'Cache-Control': 'no-store' });
    if (retryAfterSeconds !== undefined) res.set('Retry-After', String(retryAfterSeconds));
    res.json({ error: envelope });
  }
  if (!socket) return;
  res.once('finish', () => socket.destroy());
  setTimeout(() => socket.destroy(), 1_000).unref();
}

function count(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
