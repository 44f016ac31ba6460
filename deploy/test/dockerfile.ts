import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO } from './kustomize';

/**
 * A Dockerfile read into stages, enough to check what each target inherits: instructions
 * (continuation lines joined, comments dropped), the stage each FROM names, and the effective
 * USER / ENTRYPOINT / CMD of a target through its chain of stages.
 */

const DOCKERFILE = path.join(REPO, 'docker/Dockerfile');

export interface Instruction {
  op: string;
  args: string;
}
export interface Stage {
  name: string;
  from: string;
  body: Instruction[];
}
export interface Dockerfile {
  globalArgs: Record<string, string>;
  stages: Stage[];
}

export function parseDockerfile(text: string = readFileSync(DOCKERFILE, 'utf8')): Dockerfile {
  const lines: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && pending === '')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    lines.push(pending + line);
    pending = '';
  }
  const df: Dockerfile = { globalArgs: {}, stages: [] };
  for (const line of lines) {
    const m = /^(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    const args = m[2]!;
    if (op === 'FROM') {
      const f = /^(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`unreadable FROM ${args}`);
      df.stages.push({ name: f[2] ?? String(df.stages.length), from: f[1]!, body: [] });
    } else if (df.stages.length === 0) {
      if (op !== 'ARG') throw new Error(`${op} before the first FROM`);
      const [k, v] = args.split('=', 2);
      df.globalArgs[k!] = v ?? '';
    } else {
      df.stages[df.stages.length - 1]!.body.push({ op, args });
    }
  }
  return df;
}

/** Names of every stage (the --target values). */
export function dockerTargets(df: Dockerfile = parseDockerfile()): string[] {
  return df.stages.map((s) => s.name);
}

/** The stages a target is built FROM, base first, ending with the target itself. */
export function chain(df: Dockerfile, target: string): Stage[] {
  const out: Stage[] = [];
  let stage = df.stages.find((s) => s.name === target);
  if (!stage) throw new Error(`no stage ${target}`);
  while (stage) {
    out.unshift(stage);
    const parent: string = stage.from;
    stage = df.stages.find((s) => s.name === parent);
  }
  return out;
}

/** The exec-form JSON array of an ENTRYPOINT/CMD (shell form is refused: signals must reach node). */
function execForm(args: string): string[] {
  const parsed = JSON.parse(args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error(`not exec form: ${args}`);
  return parsed;
}

export interface Effective {
  user: string | undefined;
  command: string[];
  /** Instructions of the whole chain, base first. */
  body: Instruction[];
}

/** USER, ENTRYPOINT + CMD as `docker run <image>` uses them. */
export function effective(df: Dockerfile, target: string): Effective {
  let user: string | undefined;
  let entrypoint: string[] = [];
  let cmd: string[] = [];
  const body: Instruction[] = [];
  for (const stage of chain(df, target)) {
    for (const ins of stage.body) {
      body.push(ins);
      if (ins.op === 'USER') user = ins.args.trim();
      if (ins.op === 'ENTRYPOINT') {
        entrypoint = execForm(ins.args);
        cmd = []; // Docker resets an inherited CMD when ENTRYPOINT is set
      }
      if (ins.op === 'CMD') cmd = execForm(ins.args);
    }
  }
  return { user, command: [...entrypoint, ...cmd], body };
}

/** The COPY instructions of a chain as { from, sources, dest }. */
export function copies(body: Instruction[]): { from: string | undefined; sources: string[]; dest: string }[] {
  return body
    .filter((i) => i.op === 'COPY')
    .map((i) => {
      const words = i.args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const rest = words.filter((w) => !w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
      return { from, sources: rest.slice(0, -1), dest: rest[rest.length - 1]! };
    });
}
