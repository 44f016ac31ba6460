import type { Knex } from 'knex';
import type { ResolvedInput } from '@tes/catalog';
import { AppError } from '@tes/core';
import { getLiveFile } from '@tes/db';

/**
 * Every uploaded file the arguments name must be a live file of the caller's project, in a
 * format the tool takes there. Another project's file id is indistinguishable from an
 * unknown one.
 */
export async function checkInputFiles(db: Knex, projectId: string, input: ResolvedInput): Promise<void> {
  for (const ref of input.tool.inputFiles?.(input.arguments) ?? []) {
    const file = await getLiveFile(db, projectId, ref.fileId);
    if (!file) throw new AppError('file_not_found', 'file_not_found', { details: { fileId: ref.fileId, instancePath: ref.pointer } });
    if (!(ref.formats as readonly string[]).includes(file.format)) {
      throw new AppError('invalid_arguments', 'invalid_arguments', {
        details: {
          errors: [
            {
              instancePath: ref.pointer,
              keyword: 'fileFormat',
              message: `must be an uploaded ${ref.formats.join(' or ')} file`,
              params: { format: file.format },
            },
          ],
        },
      });
    }
  }
}
