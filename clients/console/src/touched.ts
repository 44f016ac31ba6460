import type { FieldErrors, Json } from './schema';

/**
 * Which fields a person has changed, by JSON pointer, or 'all' once they asked to run. A form
 * says nothing is wrong before it is touched: an example with a file still to upload is
 * incomplete, not an error.
 */
export type Touched = ReadonlySet<string> | 'all';

/** The pointers whose values differ between two versions of the input (leaves, or a whole added/removed branch). */
export function changedPointers(before: Json | undefined, after: Json | undefined, at = ''): string[] {
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  const both = (v: Json | undefined): v is Record<string, Json> | Json[] => v !== null && typeof v === 'object';
  if (!both(before) || !both(after) || Array.isArray(before) !== Array.isArray(after)) return [at];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].flatMap((k) =>
    changedPointers((before as Record<string, Json>)[k], (after as Record<string, Json>)[k], `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`),
  );
}

export function touch(touched: Touched, pointers: string[]): Touched {
  return touched === 'all' ? 'all' : new Set([...touched, ...pointers]);
}

/**
 * The errors to show: all once the person asked to run; before that, those on a changed field,
 * inside it (a slide's text when the slide was added) or around it (a slide's "one of fileId
 * or text" when its text was cleared).
 */
export function shownErrors(errors: FieldErrors, touched: Touched): FieldErrors {
  if (touched === 'all') return errors;
  const related = (pointer: string) => [...touched].some((t) => t === pointer || t.startsWith(`${pointer}/`) || pointer.startsWith(`${t}/`));
  return new Map([...errors].filter(([pointer]) => related(pointer)));
}
