/**
 * The shared request counters (table rate_limits): fixed windows per key, written by every
 * gateway replica's limiter and deleted by the relay's retention (retention.ts) once their
 * window ended RATE_LIMIT_RETENTION_MINUTES ago. `expire` is the window's end in epoch
 * milliseconds of the gateway's clock.
 */
import type { Knex } from 'knex';
import { prepared } from './prepared';

/**
 * Adds `points` to the key's counter in one upsert, starting a new window (ending at
 * `windowEndMs`) when the stored one had ended by `nowMs`. Returns the counter after the
 * addition and its window's end: the caller grants what fits under its limit.
 */
export async function addRateLimitPoints(
  db: Knex,
  input: { key: string; points: number; nowMs: number; windowEndMs: number },
): Promise<{ counted: number; windowEndMs: number }> {
  const { rows } = await prepared<{ rows: { points: number | string; expire: number | string }[] }>(
    db,
    'tes_rate_limit_lease',
    `INSERT INTO rate_limits AS r (key, points, expire) VALUES (:key, :points, :windowEndMs)
     ON CONFLICT (key) DO UPDATE SET
       points = CASE WHEN r.expire <= :nowMs THEN excluded.points ELSE r.points + excluded.points END,
       expire = CASE WHEN r.expire <= :nowMs THEN excluded.expire ELSE r.expire END
     RETURNING points, expire`,
    input,
  );
  const row = rows[0]!;
  return { counted: Number(row.points), windowEndMs: Number(row.expire) };
}
