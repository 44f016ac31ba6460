import { useEffect, useState } from 'preact/hooks';
import { TERMINAL, type Api, type Artifact, type Download, type Execution } from '../api';
import { bytes, duration, placeInLine, queuePlace, startsIn, usd, when, type QueuePlace } from '../format';
import { followExecution } from '../follow';
import { ErrorBox } from './error-box';

const CANCELLABLE = new Set(['queued', 'running', 'waiting']);

/**
 * One execution: followed live until it ends (event stream, else long polls), with its
 * steps and their cost, reserved against charged, the error of a failed one, and every
 * artifact shown in place through a fresh download URL.
 */
export function ExecutionView(props: { api: Api; id: string; initial?: Execution; onEnded?: (e: Execution) => void; detail?: boolean }) {
  const [exe, setExe] = useState<Execution | undefined>(props.initial);
  const [error, setError] = useState<unknown>(null);
  const [cancelError, setCancelError] = useState<unknown>(null);
  const [cancelling, setCancelling] = useState(false);

  useEffect(() => {
    const abort = new AbortController();
    setError(null);
    followExecution(props.api, props.id, setExe, abort.signal)
      .then((last) => props.onEnded?.(last))
      .catch((err: unknown) => {
        if (!abort.signal.aborted) setError(err);
      });
    return () => abort.abort();
  }, [props.api, props.id]);

  const cancel = async () => {
    setCancelling(true);
    setCancelError(null);
    try {
      setExe(await props.api.cancel(props.id));
    } catch (err) {
      setCancelError(err);
    } finally {
      setCancelling(false);
    }
  };

  if (!exe) return error ? <ErrorBox error={error} /> : <p class="status-line">Loading {props.id}…</p>;
  const ended = TERMINAL.includes(exe.status);
  const { completedSteps, totalSteps, currentStep } = exe.progress;
  const place = queuePlace(exe);
  return (
    <section class="execution" aria-labelledby={`h-${exe.id}`} data-status={exe.status}>
      <header class="execution-head">
        <h3 id={`h-${exe.id}`}>
          <code>{exe.tool}</code> <span class="muted">·</span> <span class="muted">{exe.model}</span>
        </h3>
        <span class={`badge status-${exe.status}`} aria-live="polite">
          {exe.status}
          {exe.cancelRequested && !ended ? ' · cancel requested' : ''}
        </span>
      </header>
      <p class="muted small">
        <code>{exe.id}</code> · created {when(exe.createdAt)}
        {exe.finishedAt ? ` · took ${duration(exe.startedAt ?? exe.createdAt, exe.finishedAt)}` : ''}
      </p>

      <dl class="money">
        <div>
          <dt>Reserved</dt>
          <dd class="reserved">{usd(exe.reservedMicros)}</dd>
        </div>
        <div>
          <dt>Charged</dt>
          <dd class="charged">{usd(exe.chargedMicros)}</dd>
        </div>
        <div>
          <dt>{ended ? 'Returned' : 'Held'}</dt>
          <dd>{usd(exe.reservedMicros - exe.chargedMicros)}</dd>
        </div>
      </dl>

      {place && <QueueLine place={place} />}
      {!ended && (
        <div class="progress" role="group" aria-label="Progress">
          <progress max={Math.max(1, totalSteps)} value={completedSteps} aria-label={`${completedSteps} of ${totalSteps} steps done`} />
          <span class="small">
            {completedSteps} of {totalSteps} steps{currentStep ? ` · now ${currentStep}` : ''}
          </span>
        </div>
      )}

      {exe.steps.length > 0 && (
        <table class="steps">
          <caption>Steps and what each cost</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Step</th>
              <th scope="col">Status</th>
              <th scope="col" class="num">
                Cost
              </th>
              <th scope="col" class="num">
                Time
              </th>
            </tr>
          </thead>
          <tbody>
            {exe.steps.map((s) => (
              <tr key={s.index}>
                <td>{s.index + 1}</td>
                <td>{s.name}</td>
                <td>
                  <span class={`dot status-${s.status}`} aria-hidden="true" /> {s.status}
                </td>
                <td class="num">{usd(s.costMicros)}</td>
                <td class="num">{duration(s.startedAt, s.finishedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      {props.detail && <Input exe={exe} />}

      {exe.status === 'failed' && (
        <div class="error-box" role="alert">
          <p class="error-title">The execution failed{exe.chargedMicros === 0 ? '; nothing was charged' : ''}.</p>
          <p class="error-code">
            <code>{exe.errorCode}</code>
          </p>
          {exe.errorMessage && <p>{exe.errorMessage}</p>}
        </div>
      )}
      {exe.status === 'needs_review' && <p class="note">An operator must settle this execution; its reservation stays held until then.</p>}

      {exe.output && exe.output.artifacts.length > 0 && (
        <div class="artifacts">
          <h4>Result</h4>
          {exe.output.artifacts.map((a) => (
            <ArtifactView key={a.id} api={props.api} executionId={exe.id} artifact={a} />
          ))}
        </div>
      )}

      {CANCELLABLE.has(exe.status) && !exe.cancelRequested && (
        <button type="button" class="danger" disabled={cancelling} onClick={() => void cancel()}>
          {cancelling ? 'Cancelling…' : 'Cancel execution'}
        </button>
      )}
      {cancelError !== null && <ErrorBox error={cancelError} title="Cancel" />}
      {error !== null && <ErrorBox error={error} title="Following the execution" />}
    </section>
  );
}

/** What the execution was asked to do, and a way to ask again (the form, filled with it). */
function Input(props: { exe: Execution }) {
  return (
    <div class="input">
      <div class="panel-head">
        <h4>Input</h4>
        <a class="button small" href={`#run/${props.exe.id}`}>
          Run again
        </a>
      </div>
      <pre class="arguments code">
        <code>{JSON.stringify(props.exe.arguments, null, 2)}</code>
      </pre>
    </div>
  );
}

/**
 * A queued execution's place in line and, when the server gives one, its estimated start,
 * counting down each second between the stream's updates (a new position comes as an update).
 * Mounted only while queued with a place, so nothing ticks once it started.
 */
function QueueLine(props: { place: QueuePlace }) {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const { position, estimatedStartAt } = props.place;
  return (
    <p class="queue-place" data-position={position}>
      <strong>{placeInLine(props.place)}</strong>
      {estimatedStartAt && (
        <>
          {' · estimated start '}
          <time dateTime={estimatedStartAt.toISOString()} title={when(estimatedStartAt.toISOString())}>
            {startsIn(estimatedStartAt, now)}
          </time>
        </>
      )}
    </p>
  );
}

/** An artifact in place (img, audio, video), through a download URL fetched when shown. */
function ArtifactView(props: { api: Api; executionId: string; artifact: Artifact }) {
  const [download, setDownload] = useState<Download | null>(null);
  const [error, setError] = useState<unknown>(null);
  const a = props.artifact;
  const refresh = () => {
    setError(null);
    props.api.download(props.executionId, a.id).then(setDownload, setError);
  };
  useEffect(refresh, [props.executionId, a.id]);
  const label = `${a.format.toUpperCase()}, ${bytes(a.sizeBytes)}`;
  return (
    <figure class="artifact" data-artifact={a.id}>
      {download && a.mimeType.startsWith('image/') && <img src={download.url} alt={`Result image (${label})`} />}
      {download && a.mimeType.startsWith('audio/') && <audio controls src={download.url} preload="metadata" />}
      {download && a.mimeType.startsWith('video/') && <video controls src={download.url} preload="metadata" playsInline />}
      <figcaption>
        <span>
          <code>{a.id}</code> · {label} · expires {when(a.expiresAt)}
        </span>
        {download && (
          <a class="button small" href={download.url} download={`${a.id}.${a.format}`} rel="noreferrer">
            Download
          </a>
        )}
        <button type="button" class="small" onClick={refresh}>
          New link
        </button>
      </figcaption>
      {error !== null && <ErrorBox error={error} compact />}
    </figure>
  );
}
