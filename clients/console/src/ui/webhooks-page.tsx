import { useEffect, useState } from 'preact/hooks';
import type { Api, Project } from '../api';
import { when } from '../format';
import { WEBHOOK_EVENT_TYPES, webhooks, type WebhookDelivery, type WebhookEndpoint, type WebhookEventType, type WebhookTestResult } from '../webhooks-api';
import { ErrorBox } from './error-box';
import './webhooks.css';

/**
 * The project's webhook endpoints (issue #29): register one, see its secret once, send it a
 * test event, read its recent deliveries, rotate its secret, delete it. The API lets only an
 * ADMIN key do any of it; a MEMBER key is told so instead of being shown a 403.
 */
export function WebhooksPage(props: { api: Api; project: Project }) {
  const { api } = props;
  const [endpoints, setEndpoints] = useState<WebhookEndpoint[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  /** The secret of the endpoint just created or rotated: shown here once, gone on the next action. */
  const [secret, setSecret] = useState<{ id: string; secret: string; why: string } | null>(null);
  const admin = props.project.key.role === 'ADMIN';

  const refresh = () => webhooks.list(api).then(setEndpoints, setError);
  useEffect(() => {
    if (admin) void refresh();
  }, [api, admin]);

  if (!admin) {
    return (
      <section class="panel webhooks">
        <h2>Webhooks</h2>
        <p class="muted" data-note="admin-only">
          Webhook endpoints are managed with an <strong>ADMIN</strong> key of the project; this key is a {props.project.key.role} key.
        </p>
      </section>
    );
  }

  /** Runs one action: its error is shown in place of the last one. */
  const act = async (what: () => Promise<void>) => {
    setError(null);
    try {
      await what();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section class="panel webhooks">
      <h2>Webhooks</h2>
      <p class="muted small">
        Signed events (Standard Webhooks) about this project’s executions are POSTed to each endpoint. Only public addresses are accepted. Verify each request
        with the endpoint’s secret, for example with the <code>standardwebhooks</code> package.
      </p>
      <CreateForm
        onCreate={(url, events) =>
          act(async () => {
            const made = await webhooks.create(api, url, events);
            setSecret({ id: made.id, secret: made.secret, why: 'created' });
            await refresh();
          })
        }
      />
      {error !== null && <ErrorBox error={error} />}
      {secret && (
        <div class="secret-once" role="status" data-secret-for={secret.id}>
          <p>
            <strong>Signing secret of {secret.id}</strong> ({secret.why}). Copy it now: it is not shown again.
          </p>
          <code class="mono">{secret.secret}</code>
          <button type="button" class="small secondary" onClick={() => setSecret(null)}>
            Done
          </button>
        </div>
      )}
      {endpoints?.length === 0 && <p class="muted">No endpoints yet.</p>}
      {endpoints && endpoints.length > 0 && (
        <ul class="endpoints">
          {endpoints.map((e) => (
            <EndpointItem
              key={e.id}
              api={api}
              endpoint={e}
              onError={setError}
              onRotated={(s) => setSecret({ id: e.id, secret: s, why: 'rotated; the old secret no longer signs' })}
              onDeleted={() => act(refresh)}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function CreateForm(props: { onCreate: (url: string, events: WebhookEventType[]) => Promise<void> }) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<WebhookEventType[]>([...WEBHOOK_EVENT_TYPES]);
  const [busy, setBusy] = useState(false);
  const toggle = (e: WebhookEventType) => setEvents(events.includes(e) ? events.filter((x) => x !== e) : [...events, e]);
  return (
    <form
      class="webhook-create"
      onSubmit={(ev) => {
        ev.preventDefault();
        setBusy(true);
        void props.onCreate(url.trim(), events).finally(() => setBusy(false));
      }}
    >
      <div class="field">
        <label for="webhook-url">
          <span class="label">Endpoint URL</span>
        </label>
        <input id="webhook-url" type="url" required placeholder="https://example.com/tes-webhooks" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      </div>
      <fieldset class="group">
        <legend>Events</legend>
        {WEBHOOK_EVENT_TYPES.map((e) => (
          <label key={e} class="check">
            <input type="checkbox" checked={events.includes(e)} onChange={() => toggle(e)} /> <code>{e}</code>
          </label>
        ))}
      </fieldset>
      <button type="submit" class="primary" disabled={busy || url.trim() === '' || events.length === 0}>
        {busy ? 'Adding…' : 'Add endpoint'}
      </button>
    </form>
  );
}

function EndpointItem(props: {
  api: Api;
  endpoint: WebhookEndpoint;
  onError: (err: unknown) => void;
  onRotated: (secret: string) => void;
  onDeleted: () => Promise<void>;
}) {
  const { api, endpoint: e } = props;
  const [test, setTest] = useState<WebhookTestResult | 'sending' | null>(null);
  const [deliveries, setDeliveries] = useState<WebhookDelivery[] | null>(null);
  const [confirming, setConfirming] = useState(false);
  const run = (what: () => Promise<void>) => () => void what().catch(props.onError);
  return (
    <li class="endpoint" data-endpoint={e.id}>
      <div class="endpoint-head">
        <code class="endpoint-url">{e.url}</code>
        <span class="muted small mono">{e.id}</span>
        <span class="muted small">
          {e.events.join(', ')} · since {when(e.createdAt)}
        </span>
      </div>
      <div class="item-actions">
        <button
          type="button"
          class="small"
          disabled={test === 'sending'}
          onClick={run(async () => {
            setTest('sending');
            try {
              setTest(await webhooks.test(api, e.id));
            } catch (err) {
              setTest(null);
              throw err;
            }
          })}
        >
          Send test event
        </button>
        <button type="button" class="small secondary" onClick={run(async () => setDeliveries(deliveries ? null : await webhooks.deliveries(api, e.id)))}>
          {deliveries ? 'Hide deliveries' : 'Recent deliveries'}
        </button>
        <button type="button" class="small secondary" onClick={run(async () => props.onRotated((await webhooks.rotate(api, e.id)).secret))}>
          Rotate secret
        </button>
        {confirming ? (
          <button
            type="button"
            class="small danger"
            onClick={run(async () => {
              await webhooks.remove(api, e.id);
              await props.onDeleted();
            })}
          >
            Really delete?
          </button>
        ) : (
          <button type="button" class="small secondary" onClick={() => setConfirming(true)}>
            Delete
          </button>
        )}
      </div>
      {test !== null && (
        <p class={`status-line${test !== 'sending' && test.delivered ? ' ok' : ''}`} role="status" data-test-result>
          {test === 'sending'
            ? 'Sending a webhook.test event…'
            : test.delivered
              ? `Delivered: the receiver answered ${test.statusCode} in ${test.durationMs} ms.`
              : `Not delivered: ${test.error ?? 'no answer'}${test.statusCode !== null ? ` (HTTP ${test.statusCode})` : ''}.`}
        </p>
      )}
      {deliveries && <Deliveries rows={deliveries} />}
    </li>
  );
}

function Deliveries(props: { rows: WebhookDelivery[] }) {
  if (props.rows.length === 0)
    return <p class="muted small">No deliveries yet: one is made each time an execution of this project ends with a subscribed event.</p>;
  return (
    <table class="deliveries">
      <thead>
        <tr>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col" class="num">
            Attempts
          </th>
          <th scope="col">Last answer</th>
          <th scope="col" class="wide">
            When
          </th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((d) => (
          <tr key={d.id} data-delivery={d.id}>
            <td>
              <code>{d.eventType}</code>
              <div class="muted small mono">
                <a href={`#executions/${d.executionId}`}>{d.executionId}</a>
              </div>
            </td>
            <td>
              <span class={`badge delivery-${d.status}`}>{d.status}</span>
            </td>
            <td class="num">{d.attempts}</td>
            <td class="small">
              {d.lastStatusCode ?? '—'}
              {d.lastError ? <div class="muted">{d.lastError}</div> : null}
              {d.nextAttemptAt ? <div class="muted">next try {when(d.nextAttemptAt)}</div> : null}
            </td>
            <td class="wide small">{when(d.deliveredAt ?? d.createdAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
