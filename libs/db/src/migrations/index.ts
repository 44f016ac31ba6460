import type { Knex } from 'knex';
import * as m1 from './20261121000001_accounts';
import * as m2 from './20261121000002_pricing_settings';
import * as m3 from './20261121000003_executions';
import * as m4 from './20261121000004_ledger';
import * as m5 from './20261121000005_outbox_counters';
import * as m6 from './20261121000006_rate_limits';
import * as m7 from './20261121000007_tool_capabilities';
import * as m8 from './20261121000008_step_external';
import * as m9 from './20261121000009_waiting_lease_index';
import * as m10 from './20261123000010_database_truth';
import * as m11 from './20261123000011_submit_guard';
import * as m12 from './20261123000012_backfill_execution_files';
import * as m13 from './20261123000013_execution_changes';
import * as m14 from './20261123000014_webhook_wakeup';
import * as m15 from './20261123000015_file_facts';
import * as m16 from './20261123000016_admin_read_indexes';
import * as m17 from './20261123000017_outbox_trace_context';
import * as m20 from './20261126000020_open_rows_have_deadlines';
import * as m21 from './20261126000021_derive_execution_files';
import * as m22 from './20261126000022_steps_recorded';
import * as m30 from './20261126000030_submit_guard_binding';
import * as m40 from './20261126000040_ledger_audit_cursor';
import * as m50 from './20261126000050_retention_indexes';
import * as m70 from './20261126000070_webhook_event_snapshot';
import * as m81 from './20261126000081_janitor_claims';
import * as m100 from './20261126000100_fair_share';
import * as m101 from './20261126000101_fair_share_indexes';
import * as m110 from './20261126000110_queue_position_indexes';
import * as m120 from './20261126000120_webhook_project_share';
import * as m200 from './20261126000200_webhook_endpoint_deliveries_index';
import * as m600 from './20261126000600_delivery_ids';
import * as m1127010 from './20261127000010_lease_index_needs_its_column';
import * as m1127020 from './20261127000020_execution_line';
import * as m1127021 from './20261127000021_line_leaves_executions_indexes';
import * as m1127030 from './20261127000030_claim_in_one_statement';
import * as m1127031 from './20261127000031_claim_reads_projects_by_id';

/** Append-only list; knex records each name in knex_migrations. */
export const MIGRATIONS: readonly [string, Knex.Migration][] = [
  ['20261121000001_accounts', m1],
  ['20261121000002_pricing_settings', m2],
  ['20261121000003_executions', m3],
  ['20261121000004_ledger', m4],
  ['20261121000005_outbox_counters', m5],
  ['20261121000006_rate_limits', m6],
  ['20261121000007_tool_capabilities', m7],
  ['20261121000008_step_external', m8],
  ['20261121000009_waiting_lease_index', m9],
  ['20261123000010_database_truth', m10],
  ['20261123000011_submit_guard', m11],
  ['20261123000012_backfill_execution_files', m12],
  ['20261123000013_execution_changes', m13],
  ['20261123000014_webhook_wakeup', m14],
  ['20261123000015_file_facts', m15],
  ['20261123000016_admin_read_indexes', m16],
  ['20261123000017_outbox_trace_context', m17],
  ['20261126000020_open_rows_have_deadlines', m20],
  ['20261126000021_derive_execution_files', m21],
  ['20261126000022_steps_recorded', m22],
  ['20261126000030_submit_guard_binding', m30],
  ['20261126000040_ledger_audit_cursor', m40],
  ['20261126000050_retention_indexes', m50],
  ['20261126000070_webhook_event_snapshot', m70],
  ['20261126000081_janitor_claims', m81],
  ['20261126000100_fair_share', m100],
  ['20261126000101_fair_share_indexes', m101],
  ['20261126000110_queue_position_indexes', m110],
  ['20261126000120_webhook_project_share', m120],
  ['20261126000200_webhook_endpoint_deliveries_index', m200],
  ['20261126000600_delivery_ids', m600],
  ['20261127000010_lease_index_needs_its_column', m1127010],
  ['20261127000020_execution_line', m1127020],
  ['20261127000021_line_leaves_executions_indexes', m1127021],
  ['20261127000030_claim_in_one_statement', m1127030],
  ['20261127000031_claim_reads_projects_by_id', m1127031],
];
