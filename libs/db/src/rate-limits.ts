/**
 * The shared request counters (table rate_limits): fixed windows per key, written by every
 * gateway replica's limiter and deleted by the relay's retention (retention.ts) once their
 * window ended RATE_LIMIT_RETENTION_MINUTES ago. `expire` is the window's end in epoch
 * milliseconds of the database's clock (tes_now()): every replica compares it, so no
 * replica's own clock may start a new window early (one running ahead would reset a window
 * others were still counting, letting a key past its limit) or hold one open.
 */
import type { Knex } from 'knex';
import { prepared } from './prepared';

/** tes_now() in epoch milliseconds, as `expire` holds it. */
const NOW_MS = `(extract(epoch FROM tes_now()) * 1000)::bigint`;

/**
 * Adds `points` to the key's counter in one upsert, starting a new window (`windowMs` long)
 * when the stored one had ended, both by the database's clock. Returns the counter after the
 * addition and how long its window has left: the caller grants what fits under its limit.
 */
export async function addRateLimitPoints(db: Knex, input: { key: string; points: number; windowMs: number }): Promise<{ counted: number; msLeft: number }> {
  const { rows } = await prepared<{ rows: { points: number | string; ms_left: number | string }[] }>(
    db,
    'tes_rate_limit_lease',
    `INSERT INTO rate_limits AS r (key, points, expire) VALUES (:key, :points, ${NOW_MS} + :windowMs)
     ON CONFLICT (key) DO UPDATE SET
       points = CASE WHEN r.expire <= ${NOW_MS} THEN excluded.points ELSE r.points + excluded.points END,
       expire = CASE WHEN r.expire <= ${NOW_MS} THEN excluded.expire ELSE r.expire END
     RETURNING points, expire - ${NOW_MS} AS ms_left`,
    input,
  );
  const row = rows[0]!;
  return { counted: Number(row.points), msLeft: Number(row.ms_left) };
}
