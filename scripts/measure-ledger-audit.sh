#!/bin/sh
# Measures the ledger audits on a database with history (issue #24): N executions, each reserved
# and settled in the journal (5 entries), half written before migration 20261126000040 (the
# baseline path) and half after it (audited by catching-up passes). Prints the migration's time,
# the catch-up throughput, one periodic pass's time with N of history, the relay's RSS while it
# audits, and the full audit's time and peak RSS. Drops its database at the end.
#
#   npm run build --silent && sh scripts/measure-ledger-audit.sh [N=1000000]
#
# Needs PostgreSQL at 127.0.0.1 (user postgres) and RabbitMQ (the relay connects to it).
set -eu
N=${1:-1000000}
HALF=$((N / 2))
DB=tes_measure_ledger_audit
URL="postgres://postgres@127.0.0.1:5432/$DB"
PSQL="psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q"
export DATABASE_URL="$URL"
# KEEP=1 keeps the database for a look afterwards (drop it: dropdb -h 127.0.0.1 -U postgres )
cleanup() { [ -n "${RELAY:-}" ] && kill "$RELAY" 2>/dev/null; [ -n "${KEEP:-}" ] || $PSQL -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null; }
trap cleanup EXIT

$PSQL -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
# every migration but the audit's
node -e "
const { createDb, MIGRATIONS } = require('./libs/db/dist');
const db = createDb({ url: process.env.DATABASE_URL, poolMax: 1 });
const list = MIGRATIONS.filter(([n]) => n !== '20261126000040_ledger_audit_cursor');
const source = { getMigrations: async () => list.map(([n]) => n), getMigrationName: (n) => n, getMigration: async (n) => list.find(([m]) => m === n)[1] };
db.migrate.latest({ migrationSource: source }).then(() => db.destroy());"

$PSQL -d $DB <<'SQL'
INSERT INTO organizations (id, name) VALUES ('org_h', 'History');
INSERT INTO projects (id, organization_id, name, available_micros)
SELECT 'prj_h' || lpad(p::text, 3, '0'), 'org_h', 'p', 1000000000000 FROM generate_series(0, 99) p;
INSERT INTO api_keys (id, project_id, name, lookup_id, digest, scopes, role)
SELECT 'key_h' || lpad(p::text, 3, '0'), 'prj_h' || lpad(p::text, 3, '0'), 'k', 'l' || p, '\x00', '{}', 'ADMIN' FROM generate_series(0, 99) p;
INSERT INTO ledger_entries (transaction_id, project_id, kind, account, amount_micros)
SELECT 'c' || p, 'prj_h' || lpad(p::text, 3, '0'), 'credit', v.account, v.amount
  FROM generate_series(0, 99) p, (VALUES ('funding', -1000000000000), ('available', 1000000000000)) v(account, amount);
SQL
# executions $1..$2, succeeded (reserved 1000, charged 600), with their journal and balances, in one transaction
seed_sql() {
  cat <<SQL
  INSERT INTO executions (id, project_id, api_key_id, tool, model, category, status, arguments, price_version, total_steps,
                          reserved_micros, charged_micros, idempotency_key, request_digest, finished_at, settled_at)
  SELECT 'exe_h' || lpad(i::text, 9, '0'), 'prj_h' || lpad((i % 100)::text, 3, '0'), 'key_h' || lpad((i % 100)::text, 3, '0'),
         'test.sleep', 'sleep', 'test', 'succeeded', '{}', 'hist', 1, 1000, 600, 'k' || i, 'd', now(), now()
    FROM generate_series($1, $2) i;
  INSERT INTO ledger_entries (transaction_id, project_id, execution_id, kind, account, amount_micros)
  SELECT v.kind || i, 'prj_h' || lpad((i % 100)::text, 3, '0'), 'exe_h' || lpad(i::text, 9, '0'), v.kind, v.account, v.amount
    FROM generate_series($1, $2) i,
         (VALUES ('reserve', 'available', -1000), ('reserve', 'reserved', 1000),
                 ('settle', 'reserved', -1000), ('settle', 'available', 400), ('settle', 'charged', 600)) v(kind, account, amount);
  UPDATE projects SET available_micros = available_micros - 600 * n
    FROM (SELECT 'prj_h' || lpad((i % 100)::text, 3, '0') AS id, count(*) AS n FROM generate_series($1, $2) i GROUP BY 1) s
   WHERE projects.id = s.id;
SQL
}
seed() { $PSQL -d $DB -c "BEGIN; $(seed_sql "$1" "$2") COMMIT;" >/dev/null; }

t0=$(date +%s.%N); seed 1 $HALF; echo "seeded $HALF executions before the migration in $(echo "$(date +%s.%N) - $t0" | bc) s"
t0=$(date +%s.%N); node services/admin/dist/main.js migrate >/dev/null
echo "migration 20261126000040 (indexes built concurrently, baseline of $((HALF * 5)) journal rows): $(echo "$(date +%s.%N) - $t0" | bc) s"
t0=$(date +%s.%N); seed $((HALF + 1)) $N; echo "seeded $((N - HALF)) executions after the migration in $(echo "$(date +%s.%N) - $t0" | bc) s"
$PSQL -d $DB -c "VACUUM ANALYZE" >/dev/null
$PSQL -d $DB -Atc "SELECT 'database ' || pg_size_pretty(pg_database_size(current_database())) || ', ' || (SELECT count(*) FROM executions) || ' executions, ' || (SELECT count(*) FROM ledger_entries) || ' journal entries'"

# the catch-up over the post-migration half, then periodic passes with N of history behind the cursor
node -e "
const { createDb, auditLedgerPass } = require('./libs/db/dist');
(async () => {
  const db = createDb({ url: process.env.DATABASE_URL, poolMax: 2 });
  let t = Date.now(), rows = 0, passes = 0, r;
  do { r = await auditLedgerPass(db); rows += r.ledgerEntries; passes++; } while (!r.caughtUp);
  const s = (Date.now() - t) / 1000;
  console.log('catch-up: ' + rows + ' journal rows in ' + passes + ' passes, ' + s.toFixed(1) + ' s (' + Math.round(rows / s) + ' rows/s), ok=' + r.ok);
  for (const k of [0, 1, 2]) {
    t = Date.now(); r = await auditLedgerPass(db);
    console.log('idle pass: ' + (Date.now() - t) + ' ms, ok=' + r.ok + ', rows ' + r.ledgerEntries + ', projects ' + r.checkedProjects);
  }
  await db.destroy();
})();"
for k in 1000 10000; do
  seed $((N + 1)) $((N + k)) && N=$((N + k))
  node -e "
const { createDb, auditLedgerPass } = require('./libs/db/dist');
(async () => {
  const db = createDb({ url: process.env.DATABASE_URL, poolMax: 2 });
  await db.raw('SELECT 1');
  const t = Date.now(); const r = await auditLedgerPass(db);
  console.log('pass after $k new executions: ' + (Date.now() - t) + ' ms, ok=' + r.ok + ', rows ' + r.ledgerEntries + ', executions ' + r.checkedExecutions);
  await db.destroy();
})();"
done

# the relay itself, auditing every second while executions arrive
METRICS_PORT=19464 LEDGER_AUDIT_INTERVAL_MS=1000 LOG_LEVEL=warn node services/relay/dist/main.js >/tmp/measure-relay.log 2>&1 &
RELAY=$!
sleep 5
for k in 1 2 3 4 5; do seed $((N + 1)) $((N + 2000)) && N=$((N + 2000)); sleep 2; done
echo "relay: $(grep -E 'VmRSS|VmHWM' /proc/$RELAY/status | tr -s ' ' | tr '\n' ' ')"
curl -s localhost:19464/metrics | grep '^tes_ledger_audit_ok' || true
kill $RELAY; wait $RELAY 2>/dev/null || true; RELAY=

/usr/bin/time -v node services/admin/dist/main.js ledger audit 2>/tmp/measure-full.err >/tmp/measure-full.json || true
grep -E '^note: ledger audit: done' /tmp/measure-full.err || true
grep -E 'Elapsed|Maximum resident' /tmp/measure-full.err
node -e "const r = require('/tmp/measure-full.json'); console.log('full audit: ok=' + r.ok + ', executions ' + r.checkedExecutions + ', journal ' + r.ledgerEntries)"
