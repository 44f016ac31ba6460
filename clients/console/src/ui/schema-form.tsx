import { useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { humanize, usd } from '../format';
import { isFileField, type FieldErrors, type Json, type JsonObject, type Schema } from '../schema';
import { FileField, type Uploader } from './file-field';

interface Ctx {
  errors: FieldErrors;
  upload: Uploader;
}

interface FieldProps {
  name: string;
  label: string;
  schema: Schema;
  value: Json | undefined;
  path: string;
  required: boolean;
  ctx: Ctx;
  onChange: (value: Json | undefined) => void;
}

/**
 * A form generated from a tool's inputSchema: one control per property (selects for enums,
 * checkboxes for booleans, text or number fields with their bounds, file pickers for file
 * ids, fieldsets for objects and repeatable fieldsets for arrays of objects). Errors are
 * shown beside the field they belong to, by JSON pointer.
 */
export function SchemaForm(props: { schema: Schema; value: JsonObject; errors: FieldErrors; upload: Uploader; onChange: (v: JsonObject) => void }) {
  const ctx: Ctx = { errors: props.errors, upload: props.upload };
  return (
    <div class="schema-form">
      <Errors id="in-root-err" messages={props.errors.get('')} />
      <ObjectFields schema={props.schema} value={props.value} path="" ctx={ctx} onChange={props.onChange} />
    </div>
  );
}

function ObjectFields(props: { schema: Schema; value: JsonObject; path: string; ctx: Ctx; onChange: (v: JsonObject) => void }) {
  const { schema, value } = props;
  const required = new Set(schema.required ?? []);
  return (
    <>
      {oneOfHint(schema) && <p class="hint form-note">{oneOfHint(schema)}</p>}
      {Object.entries(schema.properties ?? {}).map(([name, child]) => (
        <Field
          key={name}
          name={name}
          label={humanize(name)}
          schema={child}
          value={value[name]}
          path={`${props.path}/${name}`}
          required={required.has(name)}
          ctx={props.ctx}
          onChange={(v) => {
            const rest = Object.fromEntries(Object.entries(value).filter(([k]) => k !== name));
            props.onChange(v === undefined ? rest : { ...rest, [name]: v });
          }}
        />
      ))}
    </>
  );
}

function oneOfHint(schema: Schema): string | undefined {
  const names = (schema.oneOf ?? []).flatMap((b) => b.required ?? []);
  return names.length > 1 ? `Give one of ${names.map((n) => `“${n}”`).join(' or ')}.` : undefined;
}

function kindOf(schema: Schema): string {
  if (schema.enum) return 'enum';
  if (isFileField(schema)) return 'file';
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'array') return schema.items?.type === 'object' ? 'objects' : 'list';
  return type ?? 'string';
}

function Field(props: FieldProps) {
  const { schema, path, ctx } = props;
  const id = `in${path.replace(/[^A-Za-z0-9]+/g, '-')}`;
  const messages = ctx.errors.get(path);
  const kind = kindOf(schema);
  if (kind === 'object') return <ObjectField {...props} id={id} />;
  if (kind === 'objects') return <ObjectsField {...props} id={id} />;
  const describedBy = [`${id}-hint`, messages ? `${id}-err` : ''].filter(Boolean).join(' ');
  const common = { id, 'aria-describedby': describedBy, 'aria-invalid': messages ? true : undefined };
  let control: JSX.Element;
  switch (kind) {
    case 'enum':
      control = <EnumInput {...props} common={common} />;
      break;
    case 'boolean':
      control = <BooleanInput {...props} common={common} />;
      break;
    case 'integer':
    case 'number':
      control = <NumberInput {...props} common={common} integer={kind === 'integer'} />;
      break;
    case 'list':
      control = <ListInput {...props} common={common} />;
      break;
    case 'file':
      control = (
        <FileField id={id} describedBy={describedBy} invalid={!!messages} value={props.value} schema={schema} upload={ctx.upload} onChange={props.onChange} />
      );
      break;
    default:
      control = <TextInput {...props} common={common} />;
  }
  return (
    <div class={`field field-${kind}${messages ? ' invalid' : ''}`}>
      <label for={id}>
        <span class="label">{props.label}</span> <code class="prop">{props.name}</code>
        {props.required && <span class="req">required</span>}
      </label>
      {control}
      <p class="hint" id={`${id}-hint`}>
        {hint(schema, props.name)}
      </p>
      <Errors id={`${id}-err`} messages={messages} />
    </div>
  );
}

function Errors(props: { id: string; messages: readonly string[] | undefined }) {
  if (!props.messages?.length) return null;
  return (
    <p class="field-error" id={props.id}>
      {props.messages.join(' ')}
    </p>
  );
}

/** The description and the bounds a caller must keep to. */
function hint(schema: Schema, name: string): string {
  const parts: string[] = [];
  if (schema.description) parts.push(schema.description);
  const bounds: string[] = [];
  if (schema.minimum !== undefined && schema.maximum !== undefined) bounds.push(`${schema.minimum} to ${schema.maximum}`);
  else if (schema.minimum !== undefined) bounds.push(`at least ${schema.minimum}`);
  else if (schema.maximum !== undefined) bounds.push(`at most ${schema.maximum}`);
  if (schema.multipleOf !== undefined && schema.multipleOf !== 1) bounds.push(`a multiple of ${schema.multipleOf}`);
  if (schema.maxLength !== undefined && !schema.pattern) bounds.push(`up to ${schema.maxLength.toLocaleString('en-US')} characters`);
  if (schema.default !== undefined) bounds.push(`default ${JSON.stringify(schema.default)}`);
  // money is integer micro-USD: say what the bounds are in dollars
  if (name.endsWith('Micros') && schema.maximum !== undefined) bounds.push(`in micro-USD (1,000,000 = $1.00; at most ${usd(schema.maximum)})`);
  if (bounds.length) parts.push(`${bounds.join(', ')}.`.replace(/^./, (c) => c.toUpperCase()));
  return parts.join(' ');
}

type Common = Record<string, unknown>;

/** A schema value as a person reads it: strings bare, anything else as JSON. */
function show(value: Json | undefined): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function EnumInput(props: FieldProps & { common: Common }) {
  const options = props.schema.enum ?? [];
  const index = options.findIndex((o) => o === props.value);
  const optional = !props.required;
  return (
    <select
      {...props.common}
      value={index < 0 ? '' : String(index)}
      onChange={(e) => {
        const v = e.currentTarget.value;
        props.onChange(v === '' ? undefined : options[Number(v)]);
      }}
    >
      {(optional || index < 0) && <option value="">{props.schema.default !== undefined ? `Default (${show(props.schema.default)})` : '—'}</option>}
      {options.map((o, i) => (
        <option key={i} value={String(i)}>
          {show(o)}
        </option>
      ))}
    </select>
  );
}

function BooleanInput(props: FieldProps & { common: Common }) {
  const checked = typeof props.value === 'boolean' ? props.value : props.schema.default === true;
  return (
    <span class="check">
      <input type="checkbox" {...props.common} checked={checked} onChange={(e) => props.onChange(e.currentTarget.checked)} />
      <span aria-hidden="true">{checked ? 'Yes' : 'No'}</span>
    </span>
  );
}

/** Number text of a value: a number as written, a string (not yet a number) as typed. */
function numberText(value: Json | undefined): string {
  return typeof value === 'number' || typeof value === 'string' ? String(value) : '';
}

/**
 * A number as text, so a half-typed "1." or "-" is kept as typed: a parsable entry becomes a
 * number, anything else stays a string and fails the schema's type beside the field.
 */
function NumberInput(props: FieldProps & { common: Common; integer: boolean }) {
  const [draft, setDraft] = useState(numberText(props.value));
  // the draft while it still says the value; the value itself once it came from elsewhere (an
  // example, a run again), decided in this render so no frame shows the old number
  const says = draft.trim() !== '' && (Number(draft) === props.value || draft === props.value);
  const text = says ? draft : numberText(props.value);
  return (
    <input
      {...props.common}
      type="text"
      inputMode={props.integer ? 'numeric' : 'decimal'}
      autocomplete="off"
      placeholder={props.schema.default !== undefined ? show(props.schema.default) : ''}
      value={text}
      onInput={(e) => {
        const typed = e.currentTarget.value;
        setDraft(typed);
        const trimmed = typed.trim();
        if (trimmed === '') props.onChange(undefined);
        else props.onChange(Number.isFinite(Number(trimmed)) ? Number(trimmed) : trimmed);
      }}
    />
  );
}

/** An array of numbers or strings, typed as a comma-separated list. */
function ListInput(props: FieldProps & { common: Common }) {
  const numeric = ['number', 'integer'].includes(String(props.schema.items?.type));
  const shown = Array.isArray(props.value) ? props.value.map(show).join(', ') : '';
  const [draft, setDraft] = useState(shown);
  // as for numbers: the draft while it parses to the value, else the value (in this render)
  const says = JSON.stringify(parseList(draft, numeric)) === JSON.stringify(Array.isArray(props.value) ? props.value : []);
  return (
    <input
      {...props.common}
      type="text"
      autocomplete="off"
      placeholder="comma-separated, e.g. 0, 1.5, 3"
      value={says ? draft : shown}
      onInput={(e) => {
        setDraft(e.currentTarget.value);
        const items = parseList(e.currentTarget.value, numeric);
        props.onChange(items.length ? items : undefined);
      }}
    />
  );
}

function parseList(text: string, numeric: boolean): Json[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return numeric ? items.map((s) => (Number.isFinite(Number(s)) ? Number(s) : s)) : items;
}

function TextInput(props: FieldProps & { common: Common }) {
  const value = typeof props.value === 'string' ? props.value : '';
  const long = (props.schema.maxLength ?? 0) > 100;
  const onInput = (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) =>
    props.onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value);
  const placeholder = props.schema.default !== undefined ? show(props.schema.default) : '';
  return long ? (
    <textarea {...props.common} rows={props.name === 'svg' ? 6 : 3} value={value} placeholder={placeholder} onInput={onInput} />
  ) : (
    <input {...props.common} type="text" autocomplete="off" spellcheck={false} value={value} placeholder={placeholder} onInput={onInput} />
  );
}

function asObject(value: Json | undefined): JsonObject | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : undefined;
}

/** A nested object (crop, resize): a fieldset; an optional one is left out until included. */
function ObjectField(props: FieldProps & { id: string }) {
  const obj = asObject(props.value);
  const messages = props.ctx.errors.get(props.path);
  return (
    <fieldset class={`group${messages ? ' invalid' : ''}`} aria-describedby={`${props.id}-hint`}>
      <legend>
        {props.label} <code class="prop">{props.name}</code>
        {props.required && <span class="req">required</span>}
      </legend>
      <p class="hint" id={`${props.id}-hint`}>
        {props.schema.description}
      </p>
      {!props.required && (
        <label class="check include">
          <input
            type="checkbox"
            checked={obj !== undefined}
            onChange={(e) => props.onChange(e.currentTarget.checked ? initialObject(props.schema) : undefined)}
          />
          Include {props.name}
        </label>
      )}
      <Errors id={`${props.id}-err`} messages={messages} />
      {obj && <ObjectFields schema={props.schema} value={obj} path={props.path} ctx={props.ctx} onChange={props.onChange} />}
    </fieldset>
  );
}

/** Required properties with defaults filled in: a starting point for a new object. */
function initialObject(schema: Schema): JsonObject {
  const out: JsonObject = {};
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    if (child.default !== undefined && schema.required?.includes(name)) out[name] = child.default;
  }
  return out;
}

/** An array of objects (slideshow slides): one fieldset per item, added, moved and removed with buttons. */
function ObjectsField(props: FieldProps & { id: string }) {
  const items = Array.isArray(props.value) ? props.value : [];
  const itemSchema = props.schema.items ?? {};
  const singular = props.label.replace(/s$/, '');
  const messages = props.ctx.errors.get(props.path);
  const set = (next: Json[]) => props.onChange(next);
  const max = props.schema.maxItems ?? Infinity;
  return (
    <fieldset class={`group list${messages ? ' invalid' : ''}`} aria-describedby={`${props.id}-hint`}>
      <legend>
        {props.label} <code class="prop">{props.name}</code>
        {props.required && <span class="req">required</span>}
      </legend>
      <p class="hint" id={`${props.id}-hint`}>
        {props.schema.description}
      </p>
      <Errors id={`${props.id}-err`} messages={messages} />
      {items.map((item, i) => (
        <fieldset class="group item" key={i}>
          <legend>
            {singular} {i + 1}
          </legend>
          <Errors id={`${props.id}-${i}-err`} messages={props.ctx.errors.get(`${props.path}/${i}`)} />
          <ObjectFields
            schema={itemSchema}
            value={asObject(item) ?? {}}
            path={`${props.path}/${i}`}
            ctx={props.ctx}
            onChange={(v) => set(items.map((old, j) => (j === i ? v : old)))}
          />
          <div class="item-actions">
            {i > 0 && (
              <button type="button" class="small" onClick={() => set([...items.slice(0, i - 1), item, items[i - 1]!, ...items.slice(i + 1)])}>
                Move up
              </button>
            )}
            <button
              type="button"
              class="small danger"
              onClick={() => set(items.filter((_, j) => j !== i))}
              aria-label={`Remove ${singular.toLowerCase()} ${i + 1}`}
            >
              Remove
            </button>
          </div>
        </fieldset>
      ))}
      {items.length < max && (
        <button type="button" class="small" onClick={() => set([...items, initialObject(itemSchema)])}>
          Add {singular.toLowerCase()}
        </button>
      )}
    </fieldset>
  );
}
