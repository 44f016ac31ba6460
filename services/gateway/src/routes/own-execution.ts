import type { Knex } from 'knex';
import { AppError, isId } from '@tes/core';
import { getExecution, type ExecutionRecord } from '@tes/db';

/** An execution of the caller's project; any other id, well-formed or not, is the same 404. */
export async function ownExecution(db: Knex, projectId: string, id: string): Promise<ExecutionRecord> {
  const e = isId('exe', id) ? await getExecution(db, projectId, id) : null;
  if (!e) throw new AppError('execution_not_found');
  return e;
}
