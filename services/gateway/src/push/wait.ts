import type { Request, Response } from 'express';
import { AppError, isTerminal, type PublicExecution } from '@tes/core';
import { getExecutionWithSteps, publicExecution, withQueuePlace, type ExecutionView } from '@tes/db';
import type { KeyCache, KeyLoss } from '../key-cache';
import type { ChangeHub } from './change-hub';
import { isRefusal, type HeldConnections } from './held-connections';

/** The longest a request may wait (RFC 7240 `Prefer: wait=N`, larger values are treated as this). */
const MAX_WAIT_SECONDS = 60;

/**
 * `Prefer: wait=N` (RFC 7240) as a whole number of seconds, 1 to 60 (larger values count as
 * 60); null when absent or not a positive whole number (then the request is answered at once,
 * as without the header). Several preferences, in one header or several, may be given.
 */
export function preferredWaitSeconds(req: Request): number | null {
  const raw = req.headers.prefer;
  if (raw === undefined) return null;
  for (const part of (Array.isArray(raw) ? raw.join(',') : raw).split(/[,;]/)) {
    const m = /^\s*wait\s*=\s*"?(\d{1,10})"?\s*$/i.exec(part);
    if (m) {
      const n = Number(m[1]);
      return n >= 1 ? Math.min(n, MAX_WAIT_SECONDS) : null;
    }
  }
  return null;
}

/**
 * Waits up to `seconds` for the execution to end, without holding a database connection (the
 * hub wakes it on the change's notification). Resolves with the terminal view, or with the
 * current one when the time is up, the client went away or the gateway is stopping. `applied`
 * tells whether it ended within the wait (the answer then carries Preference-Applied). A wait
 * lives no longer than its key (KeyCache.watch): if the key is revoked or expires meanwhile,
 * it ends at once with the refusal a new request would get (401 platform_api_key_revoked) —
 * unless `accepted`: a submit's wait comes after its execution was accepted and reserved, so a
 * key lost then ends the wait with the execution as it is (202), never a refusal that would
 * tell the caller nothing was accepted.
 *
 * A wait is a held connection (HeldConnections): beyond its project's or organization's share,
 * or in a full process, it is not refused but answered at once, as without the header (RFC 7240
 * lets a server not honour a preference; the missing Preference-Applied says so, and a submit's
 * execution was accepted by then). For the same reason a wait preempted by a project holding
 * fewer is answered at once with the state as it is.
 */
export async function waitForEnd(
  hub: ChangeHub,
  req: Request,
  caller: { projectId: string; organizationId: string; lookupId: string; keys: KeyCache; held: HeldConnections },
  view: ExecutionView,
  seconds: number,
  accepted = false,
): Promise<{ view: ExecutionView; applied: boolean }> {
  if (isTerminal(view.execution.status)) return { view, applied: true };
  const gone = new AbortController();
  const place = caller.held.take(caller, 'wait', () => gone.abort());
  if (isRefusal(place)) return { view, applied: false };
  const onClose = () => gone.abort();
  let lost: KeyLoss | undefined;
  req.once('close', onClose);
  const unwatchKey = caller.keys.watch(caller.lookupId, (loss) => {
    lost = loss;
    gone.abort();
  });
  try {
    const ended = await hub.waitForTerminal(caller.projectId, view, seconds * 1000, gone.signal);
    if (lost && !accepted) throw new AppError(lost);
    if (ended) return { view: ended, applied: true };
  } finally {
    place.release();
    req.off('close', onClose);
    unwatchKey();
  }
  // answered with the state as it is now (not as it was when the wait began)
  const now = await getExecutionWithSteps(hub.db, caller.projectId, view.execution.id);
  const latest = now ? await withQueuePlace(hub.db, now) : view;
  return { view: latest, applied: isTerminal(latest.execution.status) };
}

/** The body of an execution answer (with its place in line where the view carries one: withQueuePlace). */
export function executionBody(view: ExecutionView): { data: PublicExecution } {
  return { data: publicExecution(view.execution, view.steps, view.queue) };
}

/** Marks an answer that honoured the wait (the execution ended within it). */
export function preferenceApplied(res: Response, seconds: number): void {
  res.set('Preference-Applied', `wait=${seconds}`);
}
