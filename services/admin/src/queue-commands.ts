/**
 * Who holds a category (issue #25): the queue gauges say how long a category's line is and how
 * many of its slots run, with no per-project label (it would grow with the customers); this
 * says which projects those are. Nothing here writes.
 */
import { categoryHolders, type CategoryHolder } from '@tes/db';
import { table } from './format';
import { command, optional, UsageError, type CommandSpec } from './spec';

const COLUMNS = [
  { header: 'category', value: (h: CategoryHolder) => h.category },
  { header: 'organization', value: (h: CategoryHolder) => h.organizationId },
  { header: 'project', value: (h: CategoryHolder) => h.projectId },
  { header: 'running', value: (h: CategoryHolder) => String(h.running), right: true },
  { header: 'queued', value: (h: CategoryHolder) => String(h.queued), right: true },
  {
    header: 'oldest queued',
    value: (h: CategoryHolder) => (h.oldestQueuedAgeSeconds === null ? '' : `${Math.round(h.oldestQueuedAgeSeconds)} s`),
    right: true,
  },
];

export const QUEUE_COMMANDS: CommandSpec[] = [
  command({
    name: 'queue show',
    summary: "The projects holding each category's worker slots and line now: running and queued executions, oldest wait.",
    options: {
      category: { description: 'only this tool category (image, audio, video, test, ...)' },
    },
    notes: ['Behind tes_queued_executions / tes_running_executions / tes_oldest_queued_execution_age_seconds (no per-project label).'],
    run: async (db, o) => {
      const category = optional(o, 'category');
      if (category !== undefined && !/^[a-z][a-z0-9-]*$/.test(category)) throw new UsageError('--category must be a category name, e.g. image');
      return { data: await categoryHolders(db, category) };
    },
    render: (r) => (r.data.length ? table(r.data, COLUMNS) : '(nothing queued or running)'),
  }),
];
