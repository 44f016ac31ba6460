import type { Response } from 'express';
import { AppError, isId, isTerminal } from '@tes/core';
import { getExecutionWithSteps, publicExecution, withQueuePlace, type ExecutionView } from '@tes/db';
import type { GatewayDeps } from '../context';
import { httpFor } from '../errors';
import type { KeyLoss } from '../key-cache';
import type { KeyRoute } from '../routing/route-spec';
import { isRefusal } from './held-connections';

/** A comment line this often keeps proxies from closing an idle stream. */
const KEEPALIVE_MS = 15_000;
/** What EventSource waits before reconnecting (it sends Last-Event-ID, and resumes). */
const RECONNECT_MS = 1_000;
/** Retry-After of a stream refused for its share: held connections free as executions end. */
const HELD_RETRY_AFTER_SECONDS = 5;

/**
 * `GET /tools/executions/{id}/events`: the execution's changes as Server-Sent Events. The
 * first event carries the current state at once (with Last-Event-ID: only if the execution
 * changed since that version); then one event per change, each `event: execution`, `id:` the
 * execution's version, `data:` the execution as GET shows it; the stream ends after the event
 * that carries a terminal status. While the execution is queued, an event is also sent, with the
 * same id, when its place in line (progress.queuePosition) moves: the ChangeHub reads the places
 * of the queued executions it watches every 5 s. Changes come from any process through the ChangeHub (Postgres
 * LISTEN/NOTIFY); a stream holds no database connection between them. A gateway that stops ends
 * its streams, and the client resumes on another with Last-Event-ID.
 *
 * A stream lives no longer than its key (issue #26: one delivered events for 15 s after the key
 * was revoked): when the key is revoked (at once, on the revocation's notification) or expires
 * (within KeyCache's recheck), the stream sends one `event: error` with the error envelope a new
 * request would get (401, `platform_api_key_revoked`) and ends; a reconnect is then refused.
 *
 * A stream is a held connection (HeldConnections, issue #25): beyond its project's or its
 * organization's share, or in a full process where it cannot preempt a larger holder, it is
 * refused with 429 rate_limit_exceeded and Retry-After before it opens. A stream preempted by a
 * project holding fewer just ends, as at a gateway's stop: the client resumes with
 * Last-Event-ID, and is refused then if its project is still above its share.
 */
export function streamExecutionEventsRoute({ db, changes, metrics, keys, held }: GatewayDeps): KeyRoute {
  return {
    method: 'get',
    path: '/tools/executions/{id}/events',
    operationId: 'streamExecutionEvents',
    scope: 'executions:read',
    body: 'none',
    handle: async ({ req, res, auth }) => {
      const id = req.params.id as string;
      const found = isId('exe', id) ? await getExecutionWithSteps(db, auth.projectId, id) : null;
      if (!found) throw new AppError('execution_not_found');
      const first = await withQueuePlace(db, found);
      const resumeFrom = lastEventId(req.get('last-event-id'));
      let end: () => void = () => undefined;
      const place = held.take(auth, 'stream', () => end());
      if (isRefusal(place)) {
        res.set('Retry-After', String(HELD_RETRY_AFTER_SECONDS));
        throw new AppError('rate_limit_exceeded', 'rate_limit_exceeded', {
          retryable: true,
          details: { reason: `too many open event streams and waits for this ${place.share}`, share: place.share, limit: place.limit },
        });
      }

      res.status(200).set({
        'Content-Type': 'text/event-stream; charset=utf-8',
        Connection: 'keep-alive',
        // nginx and friends: pass events through as they come
        'X-Accel-Buffering': 'no',
      });
      res.flushHeaders();
      res.write(`retry: ${RECONNECT_MS}\n\n`);
      metrics.openStreams.inc();

      let sent = resumeFrom ?? -1;
      // the queue position sent with version `sent` (unknown after a resume: the current one is sent)
      let sentPosition: number | undefined;
      let ended = false;
      end = () => {
        if (ended) return;
        ended = true;
        place.release();
        clearInterval(keepalive);
        unwatch();
        unwatchKey();
        unregister();
        metrics.openStreams.dec();
        res.end();
      };
      const send = (view: ExecutionView) => {
        if (ended || view.version < sent) return;
        const position = view.queue?.queuePosition;
        if (view.version === sent && (position === undefined || position === sentPosition)) return;
        sent = view.version;
        sentPosition = position;
        writeEvent(res, view);
        if (isTerminal(view.execution.status)) end();
      };
      const keepalive = setInterval(() => res.write(': keep-alive\n\n'), KEEPALIVE_MS);
      const unwatch = changes.watch(auth.projectId, id, send);
      const unwatchKey = keys.watch(auth.lookupId, (loss) => {
        if (ended) return;
        writeKeyLoss(res, loss);
        end();
      });
      const unregister = changes.atStop(end);
      req.on('close', end);
      if (changes.stopping) {
        end();
        return;
      }
      send(first);
      changes.refresh(id);
      // Already ended, and the client has seen it (it resumed from the terminal event's id).
      if (!ended && isTerminal(first.execution.status) && first.version <= sent) end();
    },
  };
}

function writeEvent(res: Response, view: ExecutionView): void {
  const data = JSON.stringify(publicExecution(view.execution, view.steps, view.queue));
  res.write(`event: execution\nid: ${view.version}\ndata: ${data}\n\n`);
}

/** The last event of a stream whose key stopped being valid: the envelope a new request would get. */
function writeKeyLoss(res: Response, loss: KeyLoss): void {
  res.write(`event: error\ndata: ${JSON.stringify({ error: { status: httpFor(loss).status, message: loss } })}\n\n`);
}

/** A Last-Event-ID this stream could have sent (a version); anything else is ignored. */
function lastEventId(raw: string | undefined): number | null {
  if (raw === undefined || !/^\d{1,15}$/.test(raw.trim())) return null;
  return Number(raw.trim());
}
