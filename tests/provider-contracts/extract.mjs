// Extracts components of a provider's OpenAPI 3.0 document as one JSON Schema (draft 2020-12),
// for refreshing the files in this folder (see SOURCES.md):
//   node tests/provider-contracts/extract.mjs <openapi.yml|json> <Component> [<Component>...]
// The first component is the root; every component it references lands in $defs. OpenAPI
// 3.0's `nullable: true` becomes a JSON Schema type union with "null"; vendor keys (x-*),
// examples and descriptions are dropped, so a refresh diff shows only contract changes.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const [file, ...names] = process.argv.slice(2);
if (!file || names.length === 0) {
  console.error('usage: extract.mjs <openapi.yml|json> <Component> [<Component>...]');
  process.exit(2);
}
const doc = parse(readFileSync(file, 'utf8'));
const components = doc.components?.schemas ?? {};
const DROP = new Set(['description', 'example', 'examples', 'title', 'discriminator', 'deprecated']);
const wanted = [...names];
const defs = {};

function convert(node) {
  if (Array.isArray(node)) return node.map(convert);
  if (typeof node !== 'object' || node === null) return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROP.has(key) || key.startsWith('x-') || key === 'nullable') continue;
    if (key === '$ref') {
      const name = value.replace('#/components/schemas/', '');
      if (!wanted.includes(name)) wanted.push(name);
      out.$ref = `#/$defs/${name}`;
      continue;
    }
    out[key] = key === 'properties' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convert(v)])) : convert(value);
  }
  if (node.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
    if (!out.type && !out.enum) return { anyOf: [out, { type: 'null' }] };
  }
  return out;
}

// `wanted` grows as references are found; an array iterator visits what is appended.
for (const name of wanted) {
  if (!components[name]) throw new Error(`no component ${name} in ${file}`);
  defs[name] = convert(components[name]);
}
const [root, ...rest] = wanted;
const schema = { $schema: 'https://json-schema.org/draft/2020-12/schema', ...defs[root] };
if (rest.length) schema.$defs = Object.fromEntries(rest.map((n) => [n, defs[n]]));
// references to the root itself point at the document root
console.log(JSON.stringify(schema, null, 2).replaceAll(`"#/$defs/${root}"`, '"#"'));
