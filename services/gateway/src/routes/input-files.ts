import type { Knex } from 'knex';
import type { Catalog, PriceList, Quote, ResolvedInput } from '@tes/catalog';
import { AppError, type FileFacts, type InputFacts } from '@tes/core';
import { getLiveFile } from '@tes/db';

/**
 * The quote of a resolved input, as the quote route answers it and the submit reserves it:
 * its files are checked (checkInputFiles) and priced by their measured facts. The one place
 * both compute it, so a quote is exactly what a submit then asks for.
 */
export async function quoteInput(
  deps: { catalog: Catalog; db: Knex },
  projectId: string,
  input: ResolvedInput,
  prices: { prices: PriceList; priceVersion: string },
): Promise<Quote> {
  const files = await checkInputFiles(deps.db, projectId, input);
  return deps.catalog.quote(input, prices.prices, prices.priceVersion, files);
}

/**
 * Every uploaded file the arguments name must be a live file of the caller's project, in a
 * format the tool takes there. Another project's file id is indistinguishable from an
 * unknown one. Returns the facts of those that have them.
 */
async function checkInputFiles(db: Knex, projectId: string, input: ResolvedInput): Promise<InputFacts> {
  const facts = new Map<string, FileFacts>();
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
    if (file.facts) facts.set(file.id, file.facts);
  }
  return facts;
}
