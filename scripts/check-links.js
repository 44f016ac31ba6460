/**
 * `npm run lint:links`: every link in the repository leads to a file inside it.
 *
 * - Markdown files: every relative link or image (`[t](path#anchor)`, `[t]: path`, `<a href>`,
 *   `<img src>`) names a file or folder that exists, without leaving the repository, and its
 *   `#anchor`, when it points into a markdown file, is one of that file's headings as GitHub
 *   slugs them (or an explicit `<a id>`). Links inside code blocks and code spans are text.
 * - Source files (comments included): every `docs/…`, `deploy/…`, `scripts/…`, `tests/…`,
 *   `libs/…`, `services/…` or `clients/…` reference to a `.md` file resolves the same way.
 * - Everywhere: no reference to a document outside the repository (`/work/…`, `../shared/…`,
 *   the old `service-spec.md`, `api-contract.md` and bare `architecture.md`): a clone has none
 *   of them. The service's contract is docs/api.md, its design docs/architecture.md.
 *
 * Usage: node scripts/check-links.js [--root DIR]. Exit 1 and one line per problem when any.
 * Plain CommonJS with no dependency, so it runs before (and without) a build.
 * check-links: ignore-file (it names the outside documents it refuses)
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', 'coverage', 'test-output', '__pycache__']);
const SOURCE_EXT = new Set(['.json', '.ts', '.tsx', '.js', '.cjs', '.mjs', '.py', '.sh', '.yaml', '.yml', '.sql', '.css', '.html']);
/** Generated from openapi.json (checked there) or too large to hold prose worth checking. */
const SKIP_FILES = new Set(['clients/typescript/src/schema.ts', 'package-lock.json']);
/** A file that names bad links on purpose (this one, its test) says so with this marker. */
const IGNORE_MARKER = 'check-links: ignore-file';
/** Documents that exist only outside a clone. `docs/architecture.md` is ours; a bare one is not. */
const OUTSIDE = [
  { re: /\/work\//, what: 'a path on one machine (/work/…)' },
  { re: /\.\.\/shared\//, what: 'a folder beside the repository (../shared/…)' },
  { re: /shared\/spec\b/, what: 'the old spec folder (shared/spec)' },
  { re: /service-spec(\.md)?\b/, what: 'service-spec.md (now docs/api.md)' },
  { re: /api-contract(\.md)?\b/, what: 'api-contract.md (now docs/api.md)' },
  { re: /(?<![\w/.-])architecture\.md\b/, what: 'a bare architecture.md (now docs/architecture.md)', sourceOnly: true },
];
/** A repository path to a markdown file named in source text, with an optional anchor. */
const SOURCE_REF = /(?<![\w/.-])((?:docs|deploy|scripts|tests|libs|services|clients)\/[\w./-]*?\.md)(#[\w-]+)?/g;

function walk(root, dir = root, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name)) walk(root, path.join(dir, entry.name), out);
    } else if (entry.isFile()) {
      out.push(path.relative(root, path.join(dir, entry.name)).split(path.sep).join('/'));
    }
  }
  return out;
}

/** GitHub's heading anchor: lower case, punctuation dropped (letters, digits, `-`, `_` kept), spaces to `-`. */
function slug(text) {
  const plain = text
    .replace(/<[^>]+>/g, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase();
  return plain.replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The text of a markdown file with fenced code blocks and code spans blanked (line numbers kept). */
function proseOf(text) {
  const lines = text.split('\n');
  let fence = null;
  return lines
    .map((line) => {
      const open = /^\s*(`{3,}|~{3,})/.exec(line);
      if (fence) {
        if (open && open[1][0] === fence[0] && open[1].length >= fence.length) fence = null;
        return '';
      }
      if (open) {
        fence = open[1];
        return '';
      }
      return line.replace(/(`+)[\s\S]*?\1/g, (m) => ' '.repeat(m.length));
    })
    .join('\n');
}

const anchorCache = new Map();
function anchorsOf(file) {
  if (anchorCache.has(file)) return anchorCache.get(file);
  const anchors = new Set();
  const seen = new Map();
  const text = fs.readFileSync(file, 'utf8');
  const lines = text.split('\n');
  let fence = null;
  for (const line of lines) {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (open && open[1][0] === fence[0] && open[1].length >= fence.length) fence = null;
      continue;
    }
    if (open) {
      fence = open[1];
      continue;
    }
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

/** What is wrong with `target` named in `from` (a repository path), or null. */
function problemWith(root, from, target, { relativeTo }) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // https:, mailto:, …: not a file
  const hash = target.indexOf('#');
  const filePart = decodeURI(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? null : target.slice(hash + 1);
  if (filePart.startsWith('/')) return `${target}: an absolute path (write it relative to ${from})`;
  const base = relativeTo === 'root' ? root : path.dirname(path.join(root, from));
  const resolved = filePart === '' ? path.join(root, from) : path.resolve(base, filePart);
  const inside = path.relative(root, resolved);
  if (inside.startsWith('..') || path.isAbsolute(inside)) return `${target}: leads outside the repository`;
  if (!fs.existsSync(resolved)) return `${target}: no such file`;
  if (anchor && resolved.endsWith('.md') && fs.statSync(resolved).isFile()) {
    if (!anchorsOf(resolved).has(anchor.toLowerCase())) return `${target}: no heading #${anchor} in ${inside.split(path.sep).join('/')}`;
  }
  return null;
}

function markdownTargets(text) {
  const prose = proseOf(text);
  const found = [];
  const lineOf = (index) => prose.slice(0, index).split('\n').length;
  // [text](target "title") and ![alt](target); the text may hold one level of brackets
  for (const m of prose.matchAll(/!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ target: m[1], line: lineOf(m.index) });
  for (const m of prose.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) found.push({ target: m[1], line: lineOf(m.index) });
  for (const m of prose.matchAll(/<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"/g)) found.push({ target: m[1], line: lineOf(m.index) });
  return found;
}

function checkLinks(root) {
  const problems = [];
  for (const file of walk(root)) {
    if (SKIP_FILES.has(file)) continue;
    const ext = path.extname(file);
    const isMarkdown = ext === '.md';
    if (!isMarkdown && !SOURCE_EXT.has(ext) && !file.endsWith('.ci/run')) continue;
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    if (text.includes(IGNORE_MARKER)) continue;
    const lines = text.split('\n');
    lines.forEach((line, i) => {
      for (const o of OUTSIDE) if (!(o.sourceOnly && isMarkdown) && o.re.test(line)) problems.push(`${file}:${i + 1}: names ${o.what}`);
    });
    if (isMarkdown) {
      for (const { target, line } of markdownTargets(text)) {
        const p = problemWith(root, file, target, { relativeTo: 'file' });
        if (p) problems.push(`${file}:${line}: ${p}`);
      }
    } else {
      lines.forEach((line, i) => {
        for (const m of line.matchAll(SOURCE_REF)) {
          const p = problemWith(root, file, m[1] + (m[2] ?? ''), { relativeTo: 'root' });
          if (p) problems.push(`${file}:${i + 1}: ${p}`);
        }
      });
    }
  }
  return problems;
}

if (require.main === module) {
  const at = process.argv.indexOf('--root');
  const root = path.resolve(at === -1 ? path.join(__dirname, '..') : process.argv[at + 1]);
  const problems = checkLinks(root);
  for (const p of problems) process.stderr.write(`${p}\n`);
  if (problems.length > 0) {
    process.stderr.write(`check-links: ${problems.length} broken or outside link(s)\n`);
    process.exit(1);
  }
}
