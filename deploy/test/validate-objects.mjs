// Validates Kubernetes objects (a JSON array on stdin) against the OpenAPI schemas the
// kubernetes-models packages compile (Kubernetes, KEDA, prometheus-operator, CloudNativePG), the way an API
// server with strict field validation (kubectl's default) decodes them: types, enums, required
// fields, formats, and no field the schema does not know. Prints one JSON array of problems.
//
// A child process of deploy/test/schemas.test.ts: the packages are ES modules only, which
// jest's CommonJS runtime cannot load on Node 20, while Node itself can.
//
// Unknown fields: the compiled validators do not reject them (the schemas carry no
// additionalProperties: false), so each object is wrapped in a Proxy that records which keys
// the validator reads. A key of an object never read is a field the schema does not declare;
// an object the validator enumerates (a map such as labels, or a free-form object) has no
// unknown keys.
import { readFileSync } from 'node:fs';
import * as monitoringV1 from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import * as cnpgV1 from '@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1';
import * as kedaV1alpha1 from '@kubernetes-models/keda/keda.sh/v1alpha1';
import * as appsV1 from 'kubernetes-models/apps/v1';
import * as autoscalingV2 from 'kubernetes-models/autoscaling/v2';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as policyV1 from 'kubernetes-models/policy/v1';
import * as coreV1 from 'kubernetes-models/v1';

/** The API groups this deployment uses; any other is looked up by its module path. */
const MODELS = {
  v1: coreV1,
  'apps/v1': appsV1,
  'autoscaling/v2': autoscalingV2,
  'batch/v1': batchV1,
  'policy/v1': policyV1,
  'keda.sh/v1alpha1': kedaV1alpha1,
  'postgresql.cnpg.io/v1': cnpgV1,
  'monitoring.coreos.com/v1': monitoringV1,
};

/** apiVersion group -> the module that models it. */
function moduleFor(apiVersion) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'keda.sh') return `@kubernetes-models/keda/keda.sh/${version}`;
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`;
  return group === '' ? `kubernetes-models/${version}` : `kubernetes-models/${group}/${version}`;
}

function track(value, path, states) {
  if (value === null || typeof value !== 'object') return value;
  const state = { path, value, read: new Set(), enumerated: false, children: new Map() };
  states.push(state);
  return new Proxy(value, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof key !== 'string') return v;
      state.read.add(key);
      if (v === null || typeof v !== 'object') return v;
      if (!state.children.has(key)) state.children.set(key, track(v, `${path}/${key}`, states));
      return state.children.get(key);
    },
    has(target, key) {
      if (typeof key === 'string') state.read.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      state.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

const objects = JSON.parse(readFileSync(0, 'utf8'));
const problems = [];
for (const [index, obj] of objects.entries()) {
  const where = `${obj.kind ?? '?'} ${obj.metadata?.name ?? '?'} (#${index})`;
  let model;
  try {
    model = (MODELS[obj.apiVersion] ?? (await import(moduleFor(String(obj.apiVersion)))))[obj.kind];
  } catch {
    model = undefined;
  }
  if (typeof model?.prototype?.validate !== 'function') {
    problems.push(`${where}: no schema for ${obj.apiVersion} ${obj.kind} (an API server would answer "no matches for kind")`);
    continue;
  }
  const states = [];
  try {
    model.prototype.validate.call(track(obj, '', states));
  } catch (err) {
    problems.push(`${where}: ${err.message}`);
  }
  for (const s of states) {
    if (Array.isArray(s.value) || s.enumerated) continue;
    for (const key of Object.keys(s.value)) {
      if (!s.read.has(key)) problems.push(`${where}: unknown field "${s.path}/${key}"`);
    }
  }
}
process.stdout.write(JSON.stringify(problems));
