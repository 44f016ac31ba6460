import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { AppError, ceilDiv, formatUsd, MAX_STEPS, type InputFacts } from '@tes/core';
import { DEFAULT_TIMEOUT_MICROS_PER_SECOND } from './prices';
import { readableErrors } from './readable-errors';
import { builtinTools } from './tools';
import type { ProviderAvailability, ModelDefinition, ModelPrice, PriceList, ProviderUsage, Quote, StepPlan, ToolDefinition, Unavailable } from './types';

export interface CatalogOptions {
  enableTestTools: boolean;
  /** Providers whose credentials are configured; none when omitted. */
  providers?: Partial<ProviderAvailability>;
  /** Further tool definitions (tests use it to exercise bounds no real tool reaches). */
  extraTools?: ToolDefinition[];
  /**
   * Retirement dates an operator set ("tool:model" -> YYYY-MM-DD, MODEL_RETIREMENTS), over
   * the ones built in: a provider's notice reaches the catalog without a release.
   */
  retirements?: Readonly<Record<string, string>>;
}

export interface ResolvedInput {
  tool: ToolDefinition;
  model: string;
  /**
   * The arguments with schema defaults applied: what is quoted, stored and run. Checked
   * against the tool's schema, so they are that tool's `Args` (see ToolDefinition).
   */
  arguments: Record<string, unknown>;
  plan: StepPlan[];
}

const NONE: Unavailable = new Set();
const NO_FACTS: InputFacts = new Map();

function modelKey(tool: string, model: string): string {
  return `${tool}:${model}`;
}

/**
 * Today as the catalog compares it with retirement dates: the UTC day of `now`. The gateway
 * passes the database's clock (CurrentSettings.today), the one clock every gateway shares, as
 * it does for the workers' reports of what they cannot run.
 */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The tool catalog shared by gateway and worker: definitions, validation (ajv, JSON Schema
 * 2020-12, compiled once) and the quote, a pure function of (price list, tool, model,
 * arguments), so both sides always agree on a price.
 */
export class Catalog {
  readonly tools: ReadonlyMap<string, ToolDefinition>;
  private readonly validators = new Map<string, ValidateFunction>();
  /** "tool:model" -> the first day the model is retired: built in, then the operator's. */
  private readonly retirements = new Map<string, string>();

  constructor(options: CatalogOptions) {
    const providers: ProviderAvailability = { replicate: false, fal: false, openai: false, ...options.providers };
    const { 'test.sleep': testSleep, ...tools } = builtinTools(providers);
    const defs: ToolDefinition[] = [...Object.values(tools), ...(options.enableTestTools ? [testSleep] : []), ...(options.extraTools ?? [])];
    this.tools = new Map(defs.map((d) => [d.name, d]));
    const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false, useDefaults: true, coerceTypes: false });
    addFormats(ajv);
    for (const def of defs) this.validators.set(def.name, ajv.compile(def.inputSchema));
    for (const def of defs) for (const m of def.models) if (m.provider?.retiresOn) this.retirements.set(modelKey(def.name, m.id), m.provider.retiresOn);
    for (const [key, day] of Object.entries(options.retirements ?? {})) {
      const [tool, model] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
      if (!this.tools.get(tool)?.models.some((m) => m.id === model)) throw new Error(`MODEL_RETIREMENTS: unknown model ${key}`);
      if (!DAY.test(day)) throw new Error(`MODEL_RETIREMENTS: ${key} needs a date as YYYY-MM-DD, got ${day}`);
      this.retirements.set(key, day);
    }
  }

  /** The first day the model is retired, if it has one (built in or set by the operator). */
  retiresOn(tool: string, model: string): string | undefined {
    return this.retirements.get(modelKey(tool, model));
  }

  private retired(tool: ToolDefinition, m: ModelDefinition, today: string): string | undefined {
    const day = this.retiresOn(tool.name, m.id);
    return day !== undefined && day <= today ? day : undefined;
  }

  private isAvailable(tool: ToolDefinition, m: ModelDefinition, unavailable: Unavailable, today: string): boolean {
    return m.available && !unavailable.has(modelKey(tool.name, m.id)) && this.retired(tool, m, today) === undefined;
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name);
  }

  categories(): string[] {
    return [...new Set([...this.tools.values()].map((t) => t.category))];
  }

  /**
   * Validates arguments against the tool's inputSchema and picks the model.
   * Throws tool_not_found, invalid_arguments or model_unavailable (details.reason "retired"
   * for a model retired on or before `today`, a UTC day: see utcDay).
   */
  resolve(toolName: string, args: unknown, unavailable: Unavailable = NONE, today: string = utcDay(new Date())): ResolvedInput {
    const tool = this.tools.get(toolName);
    if (!tool) throw new AppError('tool_not_found', 'tool_not_found', { details: { tool: toolName } });
    if (!tool.models.some((m) => this.isAvailable(tool, m, unavailable, today))) {
      throw new AppError('tool_unavailable', 'tool_unavailable', { details: { tool: toolName } });
    }
    const copy = structuredClone(args) as Record<string, unknown>;
    const validate = this.validators.get(tool.name)!;
    if (!validate(copy)) {
      // The caller's own arguments, not the copy ajv filled defaults into: a default present in
      // the copy must not hide the property a typo stands for.
      const readable = readableErrors(validate.errors ?? [], tool.inputSchema, args, tool.name);
      throw new AppError('invalid_arguments', 'invalid_arguments', { details: { errors: readable.errors, hint: readable.hint } });
    }
    const requested = typeof copy.model === 'string' ? copy.model : undefined;
    const model = requested ? tool.models.find((m) => m.id === requested) : tool.models.find((m) => this.isAvailable(tool, m, unavailable, today));
    const retiredOn = model && this.retired(tool, model, today);
    if (retiredOn) {
      // The provider no longer serves it: refused here, before anything is priced or reserved.
      throw new AppError('model_unavailable', 'model_unavailable', { details: { model: model.id, reason: 'retired', retiredOn } });
    }
    if (!model || !this.isAvailable(tool, model, unavailable, today))
      throw new AppError('model_unavailable', 'model_unavailable', { details: { model: requested ?? null } });
    copy.model = model.id;
    const plan = tool.plan(copy);
    if (plan.length > MAX_STEPS) {
      // Refused before anything is reserved; the worker also stops at the 21st step.
      throw new AppError('invalid_arguments', 'invalid_arguments', {
        details: {
          errors: [
            {
              instancePath: '',
              keyword: 'maxSteps',
              message: `this input needs ${plan.length} steps; an execution has at most ${MAX_STEPS}`,
              params: { limit: MAX_STEPS },
              hint: `arguments need ${plan.length} steps; an execution has at most ${MAX_STEPS}`,
            },
          ],
          hint: `arguments need ${plan.length} steps; an execution has at most ${MAX_STEPS}`,
        },
      });
    }
    return { tool, model: model.id, arguments: copy, plan };
  }

  /**
   * Quote for resolved input under a price list, priced on the facts of the uploaded files it
   * names (`files`; see FileFacts). Same input, facts and list, same maximum; a file's facts
   * never change, so the same input quoted under the same priceVersion gives the same maximum.
   */
  quote(input: ResolvedInput, prices: PriceList, priceVersion: string, files: InputFacts = NO_FACTS): Quote {
    const price = modelPrice(prices, input.tool.name, input.model);
    const { units } = input.tool.estimateUnits(input.arguments, files);
    const maximum = costOf(input.tool, units, price, input.arguments);
    return {
      tool: input.tool.name,
      model: input.model,
      priceVersion,
      currency: 'usd',
      minimumChargeMicros: Math.min(price.minimumMicros, maximum),
      maximumChargeMicros: maximum,
      unit: input.tool.unit,
      estimatedUnits: units,
    };
  }

  /**
   * What `units` of a step's work cost under the execution's price list, before any cap (the
   * worker caps a step's cost at what remains of the reservation). The same pricing as the
   * quote's maximum, so a step that produced the estimated units costs at most the quote.
   */
  cost(tool: ToolDefinition, model: string, units: number, prices: PriceList, args: object, usage?: ProviderUsage): number {
    return costOf(tool, units, modelPrice(prices, tool.name, model), args, usage);
  }

  /**
   * What a step of this model that ran out of its `timeoutMs` deadline costs, before the cap (the
   * worker caps it, like any step's cost, at what remains of the reservation, so the quoted
   * maximum still bounds the charge): every started second of the deadline at the model's
   * timeout rate. The work held a worker slot that long and the input alone decides whether it
   * ends; free, the same input could hold the slot again and again at no cost. The price is the
   * execution's price version's, so it is the one its quote described. A provider model's
   * timeout (the provider's wait, not our work) is free (the worker only asks for own steps).
   */
  timeoutCost(tool: ToolDefinition, model: string, timeoutMs: number, prices: PriceList): number {
    if (tool.models.find((m) => m.id === model)?.external) return 0;
    return ceilDiv(Math.max(0, timeoutMs), 1_000) * timeoutRate(modelPrice(prices, tool.name, model));
  }

  /** The public catalog (`GET /tools` data); a model retired on or before `today` is unavailable. */
  describe(
    prices: PriceList,
    priceVersion: string,
    executionEnabled: boolean,
    unavailable: Unavailable = NONE,
    today: string = utcDay(new Date()),
  ): Record<string, unknown> {
    return {
      priceVersion,
      currency: 'usd',
      executionEnabled,
      tools: [...this.tools.values()].map((tool) => this.describeTool(tool, prices, unavailable, today)),
    };
  }

  /** One tool's entry of the public catalog (`GET /tools/{tool}` data, an item of `GET /tools`'s); undefined for a tool it lacks. */
  describeOne(name: string, prices: PriceList, unavailable: Unavailable = NONE, today: string = utcDay(new Date())): Record<string, unknown> | undefined {
    const tool = this.tools.get(name);
    return tool && this.describeTool(tool, prices, unavailable, today);
  }

  /** A tool as callers read it: its schema, example, models with their availability, lifecycle and prices, and its cheapest price. */
  private describeTool(tool: ToolDefinition, prices: PriceList, unavailable: Unavailable, today: string): Record<string, unknown> {
    const models = tool.models.map((m) => {
      const price = prices.tools[tool.name]?.models[m.id];
      const retiresOn = this.retiresOn(tool.name, m.id);
      const lifecycle = !retiresOn ? '' : retiresOn <= today ? ` Retired on ${retiresOn}: the provider no longer serves it.` : ` Retires on ${retiresOn}.`;
      return {
        id: m.id,
        description: `${m.description}${lifecycle}`,
        available: this.isAvailable(tool, m, unavailable, today) && price !== undefined,
        example: m.example,
        price: price ? { description: describePrice(tool, m, price) } : null,
      };
    });
    const priced = tool.models.flatMap((m) => {
      const price = this.retired(tool, m, today) ? undefined : prices.tools[tool.name]?.models[m.id];
      return price ? [{ model: m, price }] : [];
    });
    const cheapest = priced.reduce<(typeof priced)[number] | undefined>((a, p) => (!a || p.price.minimumMicros < a.price.minimumMicros ? p : a), undefined);
    return {
      name: tool.name,
      description: tool.description,
      category: tool.category,
      available: models.some((m) => m.available),
      inputSchema: tool.inputSchema,
      example: tool.example,
      models,
      price: cheapest
        ? { minimumMicros: cheapest.price.minimumMicros, unit: tool.unit, description: `from ${describePrice(tool, cheapest.model, cheapest.price)}` }
        : null,
    };
  }
}

/** The tool's own pricing when it has one, else max(minimum, units x unit price). */
function costOf(tool: ToolDefinition, units: number, price: ModelPrice, args: object, usage?: ProviderUsage): number {
  return tool.cost ? tool.cost(units, price, args, usage) : Math.max(price.minimumMicros, units * price.unitPriceMicros);
}

function timeoutRate(price: ModelPrice): number {
  return price.timeoutMicrosPerSecond ?? DEFAULT_TIMEOUT_MICROS_PER_SECOND;
}

/**
 * A model's price as callers read it (`GET /tools`): the tool's own words, then what a step
 * that runs out of its deadline costs, so a caller knows before submitting that such a
 * failure is not free.
 */
function describePrice(tool: ToolDefinition, model: ModelDefinition, price: ModelPrice): string {
  const rate = timeoutRate(price);
  const own = tool.describePrice(price);
  if (model.external || rate === 0) return own;
  return `${own}; a step that runs out of its deadline (step_timeout) costs ${formatUsd(rate)} per started second of the deadline, at most the reservation`;
}

function modelPrice(prices: PriceList, tool: string, model: string): ModelPrice {
  const price = prices.tools[tool]?.models[model];
  if (!price) throw new AppError('model_unavailable', 'model_unavailable', { details: { tool, model, reason: 'not priced' } });
  return price;
}
