// The demo chat page: load a model (URL or local file) with a progress bar, stream replies,
// stop them, show tokens/s. The package is served at /pkg/ by serve.mjs.
import { load } from '/pkg/index.js';

const $ = (id) => document.getElementById(id);
const state = { engine: null, messages: [], abort: null };
const params = new URLSearchParams(location.search);
$('url').value = params.get('model') ?? '';

function status(text, error = false) {
  $('status').textContent = text;
  $('status').className = error ? 'error' : '';
  document.body.dataset.status = error ? 'error' : text.split(':')[0];
}

async function loadModel(source, label) {
  $('load').disabled = true;
  $('send').disabled = true;
  await state.engine?.dispose();
  state.engine = null;
  state.messages = [];
  $('log').textContent = '';
  status(`Loading ${label}…`);
  const t0 = performance.now();
  try {
    state.engine = await load(source, {
      nCtx: 2048,
      // ?threads=N; by default the engine takes the cores (at most 8) where the page is
      // cross-origin isolated, and one thread where it is not
      threads: params.has('threads') ? Number(params.get('threads')) : undefined,
      cache: $('cache').checked,
      onProgress: ({ loaded, total }) => {
        $('progress').value = loaded / total;
        status(`Loading ${label}: ${(loaded / 1e6).toFixed(0)} / ${(total / 1e6).toFixed(0)} MB`);
      },
    });
    const i = state.engine.info();
    window.superinferInfo = i;
    status(`Ready: ${i.name ?? i.architecture}, ${(i.file_size / 1e6).toFixed(0)} MB${i.cached ? ' (from the cache)' : ''}, ` +
      `context ${i.n_ctx}, ${i.threads} thread${i.threads > 1 ? 's' : ''} (${i.build}, ${i.isa}; page ${i.cross_origin_isolated ? '' : 'not '}cross-origin isolated), ` +
      `loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    $('send').disabled = false;
    $('prompt').disabled = false;
  } catch (e) {
    status(`Error (${e.code ?? 'unknown'}): ${e.message}`, true);
  } finally {
    $('load').disabled = false;
  }
}

$('load').onclick = () => {
  const url = $('url').value.trim();
  if (url) loadModel(url, url.split('/').pop());
};
$('file').onchange = () => {
  // several files: the shards of a split model (gguf-split), in the order of their names
  const files = [...$('file').files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (files.length) loadModel(files.length === 1 ? files[0] : files, files.length === 1 ? files[0].name : `${files[0].name} (${files.length} shards)`);
};

function add(cls, text) {
  const div = document.createElement('div');
  div.className = cls;
  div.textContent = text;
  $('log').append(div);
  $('log').scrollTop = $('log').scrollHeight;
  return div;
}

$('send').onclick = async () => {
  const content = $('prompt').value.trim();
  if (!content || !state.engine) return;
  $('prompt').value = '';
  add('user', `You: ${content}`);
  state.messages.push({ role: 'user', content });
  const out = add('assistant', '');
  state.abort = new AbortController();
  $('send').disabled = true;
  $('stop').disabled = false;
  document.body.dataset.generating = 'yes';
  let reply = '';
  try {
    for await (const chunk of state.engine.chat(state.messages, { maxTokens: 512, temperature: 0.7, signal: state.abort.signal })) {
      const c = chunk.choices[0];
      if (c.delta.content) {
        reply += c.delta.content;
        out.textContent = reply;
        $('log').scrollTop = $('log').scrollHeight;
      }
      if (chunk.timings) {
        const t = chunk.timings;
        $('stats').textContent = `${c.finish_reason}: prompt ${t.prompt_n} tokens at ${t.prompt_per_second.toFixed(1)} t/s, ` +
          `reply ${t.predicted_n} tokens at ${t.predicted_per_second.toFixed(1)} t/s`;
        document.body.dataset.finish = c.finish_reason;
      }
    }
    state.messages.push({ role: 'assistant', content: reply });
  } catch (e) {
    add('error', `Error (${e.code ?? 'unknown'}): ${e.message}`);
    state.messages.pop();
  } finally {
    $('send').disabled = false;
    $('stop').disabled = true;
    document.body.dataset.generating = 'no';
  }
};

$('stop').onclick = () => state.abort?.abort();
$('prompt').onkeydown = (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('send').click();
  }
};
