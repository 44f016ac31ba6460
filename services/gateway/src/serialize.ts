/** The public execution object lives with the records (libs/db), shared with the relay's webhooks. */
export { publicExecution } from '@tes/db';
