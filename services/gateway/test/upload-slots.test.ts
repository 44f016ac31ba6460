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
