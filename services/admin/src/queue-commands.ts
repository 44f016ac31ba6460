/**
 * Fair share of the worker slots (issue #25) for operators: a project's limit in a category,
 * and who holds and queues a category now (in place of a metric labelled by project, whose
 * cardinality would grow with the customers).
 */
import type { Knex } from 'knex';
import { Catalog } from '@tes/catalog';
import { categoryQueue, findProject, setProjectCategoryLimit, type CategoryQueue } from '@tes/db';
import { fields, section, table } from './format';
import { idOption, optional, PreconditionError, required, UsageError, type CliSettings, type CommandSpec } from './spec';

/** PROJECT_SLOT_SHARE's default, when the CLI is run without the configuration's (tests). */
const DEFAULT_SHARE = 0.5;
const MAX_LIMIT = 100_000;

/** A category the catalog knows (test tools included: an operator may set the test category too). */
function category(opts: Record<string, string | boolean | undefined>): string {
  const c = required(opts, 'category');
  const known = new Catalog({ enableTestTools: true }).categories();
  if (!known.includes(c)) throw new UsageError(`--category must be one of ${known.join(', ')} (got ${JSON.stringify(c.slice(0, 60))})`);
  return c;
}

function wholeNumber(value: string | undefined, name: string, min: number, max: number): number {
  if (value === undefined || !/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

function renderQueue(q: CategoryQueue): string {
  return [
    fields([
      ['category', q.category],
      ['live slots', q.liveSlots],
      ['default limit', q.defaultLimit],
      ['running', q.running],
      ['queued', q.queued],
    ]),
    section(
      'projects (most running + queued first)',
      q.projects.length === 0
        ? null
        : table(q.projects, [
            { header: 'project', value: (p) => p.projectId },
            { header: 'organization', value: (p) => p.organizationId },
            { header: 'running', value: (p) => p.running, right: true },
            { header: 'queued', value: (p) => p.queued, right: true },
            { header: 'oldest queued s', value: (p) => p.oldestQueuedSeconds, right: true },
            { header: 'limit', value: (p) => `${p.limit}${p.overridden ? ' (set)' : ''}`, right: true },
          ]),
    ),
  ].join('\n');
}

export const QUEUE_COMMANDS: CommandSpec[] = [
  {
    name: 'projects set-limit',
    summary: "Set (or with --clear remove) a project's limit of running executions in a category; work beyond it stays queued.",
    positionals: '<projectId>',
    options: {
      category: { description: 'tool category (image, audio, video, test)', required: true },
      'max-running': { description: 'executions of the category the project may run at once, 1 or more' },
      clear: { description: 'remove the override: the default (PROJECT_SLOT_SHARE of the live slots) applies again', type: 'boolean' },
    },
    notes: [
      'Without an override a project, and an organization with all its projects, may hold PROJECT_SLOT_SHARE',
      "(default 0.5) of a category's live worker slots, at least one. An override replaces the project's",
      "limit and lifts its organization's bound to it. Takes effect at the next claim.",
    ],
    run: async (db: Knex, o, pos) => {
      const projectId = idOption(pos[0] ?? '', 'prj', '<projectId>');
      const c = category(o);
      const max = optional(o, 'max-running');
      if ((max === undefined) === (o.clear !== true)) throw new UsageError('give either --max-running N or --clear');
      if (!(await findProject(db, projectId))) throw new PreconditionError(`project ${projectId} not found`);
      if (o.clear === true) {
        const removed = await setProjectCategoryLimit(db, { projectId, category: c, maxRunning: null });
        return { projectId, category: c, maxRunning: null, removed };
      }
      const maxRunning = wholeNumber(max, '--max-running', 1, MAX_LIMIT);
      await setProjectCategoryLimit(db, { projectId, category: c, maxRunning });
      return { projectId, category: c, maxRunning };
    },
  },
  {
    name: 'queue show',
    summary: 'Who holds and queues a category now: running and queued executions per project, most first, with limits.',
    options: {
      category: { description: 'tool category (image, audio, video, test)', required: true },
      top: { description: 'projects shown (default 20, at most 1000)' },
    },
    notes: [
      'Reads only open work (the queued and running executions of the category), never the history.',
      'live slots: the slots of the workers consuming the category (their heartbeats of the last 30 s).',
      'limit: the project\'s running limit, "(set)" when an operator set it (projects set-limit).',
    ],
    run: (db: Knex, o, _pos, _note, settings: CliSettings) =>
      categoryQueue(db, {
        category: category(o),
        share: settings.projectSlotShare ?? DEFAULT_SHARE,
        top: o.top === undefined ? 20 : wholeNumber(optional(o, 'top'), '--top', 1, 1000),
      }),
    render: renderQueue,
  },
];
