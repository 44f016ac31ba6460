import { loadOpenApi, OpenApiValidator, escapePointer } from '../src/openapi';

/** What the OpenAPI tests share: the document, a validator for it, and its operations. */
export const doc = loadOpenApi();
export const validator = new OpenApiValidator(doc);
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface Op {
  template: string;
  method: string;
  pointer: string;
  operation: Obj;
}
export const operations: Op[] = Object.entries(doc.paths).flatMap(([template, item]) =>
  METHODS.filter((m) => isObj(item[m])).map((method) => ({
    template,
    method,
    pointer: `#/paths/${escapePointer(template)}/${method}`,
    operation: item[method] as Obj,
  })),
);
export const needsAuth = (op: Op) => ((op.operation.security ?? doc.security) as unknown[]).length > 0;
