export * from './types';
export * from './catalog';
export * from './prices';
export { IMAGE_RENDER_LIMITS } from './tools/image-render';
