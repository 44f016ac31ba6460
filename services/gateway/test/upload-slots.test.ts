import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { UploadSlots } from '../src/upload-slots';

/** The slot bookkeeping of uploads, driven with response-like emitters. */
let projects = 0;
function fakeResponse(projectId = `prj_${(projects += 1)}`, organizationId = `org_of_${projectId}`): Response & EventEmitter {
  return Object.assign(new EventEmitter(), { locals: { auth: { projectId, organizationId } } }) as unknown as Response & EventEmitter;
}

function take(slots: UploadSlots, res: Response): void {
  slots.take()({} as Request, res, (() => undefined) as NextFunction);
}

it('a client that goes away while its upload is processed keeps the slot until the work ends', async () => {
  const slots = new UploadSlots(1);
  const res = fakeResponse();
  take(slots, res);
  let finish!: () => void;
  const work = slots.run(res, () => new Promise<void>((r) => (finish = r)));
  res.emit('close'); // the client disconnected; the handler still holds the body in memory
  expect(slots.busy).toBe(1);
  expect(() => take(slots, fakeResponse())).toThrow(expect.objectContaining({ code: 'service_unavailable' }));
  finish();
  await work;
  expect(slots.busy).toBe(0);
});

it('a request whose body never reaches the handler (413, bad JSON, abort) frees its slot when it ends', () => {
  const slots = new UploadSlots(2);
  const refused = fakeResponse();
  take(slots, refused);
  const aborted = fakeResponse();
  take(slots, aborted);
  expect(slots.busy).toBe(2);
  refused.emit('finish');
  aborted.emit('close');
  expect(slots.busy).toBe(0);
  refused.emit('close'); // both events of one response count once
  expect(slots.busy).toBe(0);
});

it('a handler that throws gives its slot back', async () => {
  const slots = new UploadSlots(1);
  const res = fakeResponse();
  take(slots, res);
  await expect(slots.run(res, async () => Promise.reject(new Error('storage down')))).rejects.toThrow('storage down');
  expect(slots.busy).toBe(0);
  res.emit('finish');
  expect(slots.busy).toBe(0);
});

it('one project holds at most half the slots (at least one); others are served meanwhile', () => {
  const slots = new UploadSlots(4);
  expect(slots.perProject).toBe(2);
  const mine = [fakeResponse('prj_a'), fakeResponse('prj_a')];
  for (const r of mine) take(slots, r);
  expect(() => take(slots, fakeResponse('prj_a'))).toThrow(expect.objectContaining({ code: 'service_unavailable' }));
  take(slots, fakeResponse('prj_b'));
  expect(slots.busy).toBe(3);
  mine[0]!.emit('finish');
  take(slots, fakeResponse('prj_a')); // its share is free again
  expect(new UploadSlots(1).perProject).toBe(1);
});

it('the projects of one organization together hold at most half the slots', () => {
  const slots = new UploadSlots(4);
  expect(slots.perOrganization).toBe(2);
  take(slots, fakeResponse('prj_a', 'org_1'));
  take(slots, fakeResponse('prj_b', 'org_1'));
  expect(() => take(slots, fakeResponse('prj_c', 'org_1'))).toThrow(expect.objectContaining({ code: 'service_unavailable' }));
  take(slots, fakeResponse('prj_d', 'org_2'));
  expect(slots.busy).toBe(3);
});

it('a project with no upload in flight takes the slot of the longest-held upload still reading its body once its turn is over; a processed upload is never cut', async () => {
  const seen: string[] = [];
  const slots = new UploadSlots(2, { minBytesPerSecond: 0, graceMs: 0, turnMs: 100, observe: (outcome) => seen.push(outcome) });
  const reading = cuttable(fakeResponse('prj_a'));
  take(slots, reading);
  const processed = cuttable(fakeResponse('prj_b'));
  take(slots, processed);
  let finish!: () => void;
  const work = slots.run(processed, () => new Promise<void>((r) => (finish = r)));
  // within the turn: refused, told when it ends
  expect(() => take(slots, cuttable(fakeResponse('prj_c')))).toThrow(expect.objectContaining({ code: 'service_unavailable' }));
  await new Promise((r) => setTimeout(r, 120));
  take(slots, cuttable(fakeResponse('prj_c')));
  expect(reading.statusCode).toBe(503);
  expect(reading.sent).toMatchObject({ error: { status: 'UNAVAILABLE', message: 'service_unavailable' } });
  expect(slots.busy).toBe(2);
  // the processed upload is past its turn too, but its memory is in use: no slot for prj_d
  await new Promise((r) => setTimeout(r, 120));
  take(slots, cuttable(fakeResponse('prj_e'))); // prj_c's upload, reading, is past its turn: cut
  expect(() => take(slots, cuttable(fakeResponse('prj_d')))).toThrow(expect.objectContaining({ code: 'service_unavailable' }));
  finish();
  await work;
  expect(slots.busy).toBe(1);
  expect(seen).toEqual(['refused', 'preempted', 'preempted', 'refused']);
});

/** A response the slots can answer (a cut upload gets its envelope). */
function cuttable(res: Response & EventEmitter): Response & EventEmitter & { statusCode?: number; sent?: unknown } {
  const r = res as Response & EventEmitter & { statusCode?: number; sent?: unknown; headersSent: boolean };
  r.headersSent = false;
  r.status = ((code: number) => ((r.statusCode = code), r)) as Response['status'];
  r.set = (() => r) as Response['set'];
  r.json = ((body: unknown) => ((r.sent = body), (r.headersSent = true), r)) as Response['json'];
  return r;
}
