import type { Request, Response } from 'express';
import { isTerminal } from '@tes/core';
import { getExecutionWithSteps, publicExecution, type ExecutionView } from '@tes/db';
import type { ChangeHub } from './change-hub';

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
 * tells whether it ended within the wait (the answer then carries Preference-Applied).
 */
export async function waitForEnd(
  hub: ChangeHub,
  req: Request,
  projectId: string,
  view: ExecutionView,
  seconds: number,
): Promise<{ view: ExecutionView; applied: boolean }> {
  if (isTerminal(view.execution.status)) return { view, applied: true };
  const gone = new AbortController();
  const onClose = () => gone.abort();
  req.once('close', onClose);
  try {
    const ended = await hub.waitForTerminal(projectId, view, seconds * 1000, gone.signal);
    if (ended) return { view: ended, applied: true };
  } finally {
    req.off('close', onClose);
  }
  // answered with the state as it is now (not as it was when the wait began)
  const now = await getExecutionWithSteps(hub.db, projectId, view.execution.id);
  const latest = now ?? view;
  return { view: latest, applied: isTerminal(latest.execution.status) };
}

/** The body of an execution answer. */
export function executionBody(view: ExecutionView): { data: Record<string, unknown> } {
  return { data: publicExecution(view.execution, view.steps) };
}

/** Marks an answer that honoured the wait (the execution ended within it). */
export function preferenceApplied(res: Response, seconds: number): void {
  res.set('Preference-Applied', `wait=${seconds}`);
}
