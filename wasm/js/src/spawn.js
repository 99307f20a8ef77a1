// A worker running this package's worker.js, with one post / onMessage / onError / terminate
// shape in browsers and Node. The page spawns the engine's worker with it, and the engine's
// worker its helper threads (the threaded build): one worker file for both roles.

const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof window === 'undefined' && typeof self === 'undefined';

export async function spawnWorker() {
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(new URL('./worker.js', import.meta.url));
    w.unref();
    return {
      post: (m, transfer) => w.postMessage(m, transfer),
      onMessage: (f) => w.on('message', f),
      onError: (f) => w.on('error', f),
      terminate: () => w.terminate(),
    };
  }
  // written out literally so that bundlers (Vite, webpack) find and copy the worker
  const w = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  return {
    post: (m, transfer) => w.postMessage(m, transfer ?? []),
    onMessage: (f) => { w.onmessage = (e) => f(e.data); },
    onError: (f) => { w.onerror = (e) => f(e); },
    terminate: () => w.terminate(),
  };
}
