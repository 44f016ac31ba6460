import { useEffect, useState } from 'preact/hooks';
import { EXECUTION_STATUSES, type Api, type Catalog, type ExecutionPage } from '../api';
import { usd, when } from '../format';
import { ErrorBox } from './error-box';

const PAGE_SIZE = 10;

/** The project's executions, newest first, filtered by status and tool, a page at a time. */
export function ExecutionsList(props: { api: Api; catalog: Catalog; open: (id: string) => void }) {
  const [status, setStatus] = useState('');
  const [tool, setTool] = useState('');
  // `before` of each page seen so far: the last is the page shown, popping goes back to newer ones.
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [page, setPage] = useState<ExecutionPage | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(false);
  const before = cursors[cursors.length - 1];

  // An answer is shown only while its filters are still the chosen ones: two filter changes in
  // quick succession send two lists, and the first answer may arrive last (CI saw the unfiltered
  // page overwrite the filtered one); the effect's cleanup marks the older request stale.
  const load = () => {
    let current = true;
    setLoading(true);
    setError(null);
    props.api
      .list({ status, tool, limit: PAGE_SIZE, ...(before ? { before } : {}) })
      .then(
        (p) => current && setPage(p),
        (err: unknown) => current && setError(err),
      )
      .finally(() => current && setLoading(false));
    return () => {
      current = false;
    };
  };
  useEffect(load, [status, tool, before]);

  const filter = (set: (v: string) => void) => (e: { currentTarget: HTMLSelectElement }) => {
    set(e.currentTarget.value);
    setCursors([undefined]);
  };

  return (
    <section class="panel" aria-labelledby="h-executions">
      <div class="panel-head">
        <h2 id="h-executions">Executions</h2>
        <button type="button" class="small secondary" onClick={() => load()} disabled={loading}>
          Refresh
        </button>
      </div>
      <div class="filters">
        <div class="field">
          <label for="filter-status">
            <span class="label">Status</span>
          </label>
          <select id="filter-status" value={status} onChange={filter(setStatus)}>
            <option value="">any</option>
            {EXECUTION_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-tool">
            <span class="label">Tool</span>
          </label>
          <select id="filter-tool" value={tool} onChange={filter(setTool)}>
            <option value="">any</option>
            {props.catalog.tools.map((t) => (
              <option key={t.name} value={t.name}>
                {t.name}
              </option>
            ))}
          </select>
        </div>
      </div>
      {error !== null && <ErrorBox error={error} />}
      {page?.data.length === 0 && <p class="muted">No executions{status || tool ? ' match these filters' : ' yet'}.</p>}
      {page && page.data.length > 0 && (
        <table class="executions" aria-busy={loading}>
          <thead>
            <tr>
              <th scope="col">Execution</th>
              <th scope="col">Status</th>
              <th scope="col" class="num">
                Charged
              </th>
              <th scope="col" class="wide">
                Created
              </th>
            </tr>
          </thead>
          <tbody>
            {page.data.map((e) => (
              <tr key={e.id} data-execution={e.id}>
                <td>
                  <a
                    href={`#executions/${e.id}`}
                    onClick={(ev) => {
                      ev.preventDefault();
                      props.open(e.id);
                    }}
                  >
                    <code>{e.tool}</code>
                  </a>
                  <div class="muted small mono">{e.id}</div>
                </td>
                <td>
                  <span class={`badge status-${e.status}`}>{e.status}</span>
                </td>
                <td class="num">
                  {usd(e.chargedMicros)}
                  <div class="muted small">of {usd(e.reservedMicros)}</div>
                </td>
                <td class="wide small">{when(e.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="Pages">
        <button type="button" class="small secondary" disabled={cursors.length === 1 || loading} onClick={() => setCursors(cursors.slice(0, -1))}>
          ← Newer
        </button>
        <span class="muted small">Page {cursors.length}</span>
        <button
          type="button"
          class="small secondary"
          disabled={!page?.hasMore || loading}
          onClick={() => page?.nextBefore && setCursors([...cursors, page.nextBefore])}
        >
          Older →
        </button>
      </nav>
    </section>
  );
}
