import type { Execution } from './types';

/** Where a queued execution stands in its category's line, as the server reported it. */
export interface QueuePlace {
  /** 1 is the next to start: the queued executions of its category the fair order starts before it, plus one. */
  position: number;
  /** The server's estimate of its start (on the server's clock); undefined when it gives none. */
  estimatedStartAt: Date | undefined;
}

/**
 * The execution's place in line while it is `queued`, else undefined: after it started there
 * is nothing to show, and a server older than the fair-share order reports no place at all.
 * A value the contract does not allow (a position below 1 or not whole, a time that does not
 * parse) counts as absent: showing "position 0" would mislead more than showing nothing.
 */
export function queuePlace(e: Pick<Execution, 'status' | 'progress'>): QueuePlace | undefined {
  if (e.status !== 'queued') return undefined;
  const { queuePosition, estimatedStartAt } = e.progress;
  if (typeof queuePosition !== 'number' || !Number.isInteger(queuePosition) || queuePosition < 1) return undefined;
  const at = typeof estimatedStartAt === 'string' ? new Date(estimatedStartAt) : undefined;
  return { position: queuePosition, estimatedStartAt: at && !Number.isNaN(at.getTime()) ? at : undefined };
}

/**
 * The place in words: "position 3 in line, est. start in ~12 s", "next in line", … The
 * estimate is counted from `now` on this machine's clock (a clock that is off shifts it by as
 * much); one that is due or past reads "any moment", since the execution is still waiting.
 */
export function describeQueuePlace(place: QueuePlace, now: number = Date.now()): string {
  const where = place.position === 1 ? 'next in line' : `position ${place.position} in line`;
  return place.estimatedStartAt ? `${where}, est. start ${startsIn(place.estimatedStartAt.getTime() - now)}` : where;
}

/** "in ~12 s" up to 89 s, "in ~4 min" up to 89 min, then hours: an estimate, so whole units. */
function startsIn(ms: number): string {
  if (ms < 500) return 'any moment';
  const seconds = Math.round(ms / 1000);
  if (seconds < 90) return `in ~${seconds} s`;
  const minutes = Math.round(seconds / 60);
  return minutes < 90 ? `in ~${minutes} min` : `in ~${Math.round(minutes / 60)} h`;
}
