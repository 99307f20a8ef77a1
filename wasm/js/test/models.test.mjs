// The packed package on the real models: the fixture prompts' greedy continuations equal
// native `superinfer run` (a parting allowed only at a llama.cpp near-tie), tokenization
// equals llama.cpp's, chat, abort within one token, and an engine that stays usable after
// an error or an abort; all on the threaded build at two threads (Node has shared memory),
// whose greedy tokens are exactly the single-thread build's (the kernels are batch
// invariant, and a row's result does not depend on the thread that computes it).

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { load } from 'superinfer';
import { env, fixture, nativeRun, nativeRunWith, divergence, collect, MODELS, expectedBuild } from './helpers.mjs';

for (const name of Object.keys(MODELS)) {
  describe(name, () => {
    let engine;
    let single;
    const path = () => env(MODELS[name].env);

    before(async () => {
      const progress = [];
      engine = await load(path(), { nCtx: 512, threads: 2, onProgress: (p) => progress.push(p) });
      const info = engine.info();
      assert.equal(info.isa, 'simd128');
      assert.equal(info.threads, 2, 'the threads asked for');
      assert.equal(info.build, expectedBuild(true));
      assert.equal(info.n_ctx, 512);
      single = await load(path(), { nCtx: 512, threads: 1 });
      assert.equal(single.info().threads, 1);
      assert.equal(single.info().build, expectedBuild(false));
      assert.ok(progress.length > 0 && progress.at(-1).loaded === progress.at(-1).total, 'progress reaches the total');
      assert.equal(progress.at(-1).total, info.file_size);
      // one copy of the weights: the wasm memory is the file, the KV cache and a little more
      const slack = info.wasm_bytes - info.file_size - info.kv_cache_bytes;
      console.log(`${name}: wasm memory ${info.wasm_bytes} B = file ${info.file_size} + KV ${info.kv_cache_bytes} + ${slack}; loaded in ${info.load_ms.toFixed(0)} ms`);
      assert.ok(slack <= 64 << 20, `wasm memory exceeds file + KV cache by ${slack} bytes (> 64 MiB)`);
    });

    after(async () => {
      await engine?.dispose();
      await single?.dispose();
    });

    test('the threaded build\'s greedy tokens are exactly the single-thread build\'s', async () => {
      for (const c of fixture(name, 'generate.json')) {
        const n = c.generated_ids.length;
        const two = await collect(engine.complete(c.prompt, { temperature: 0, maxTokens: n }));
        const one = await collect(single.complete(c.prompt, { temperature: 0, maxTokens: n }));
        assert.deepEqual(two.tokens.map((t) => t.id), one.tokens.map((t) => t.id), c.prompt);
        const [t2, t1] = [two.last.timings, one.last.timings];
        console.log(`${name} ${JSON.stringify(c.prompt.slice(0, 24))}: ${n} identical tokens; prompt ${t1.prompt_per_second.toFixed(1)} -> ${t2.prompt_per_second.toFixed(1)} t/s, decode ${t1.predicted_per_second.toFixed(1)} -> ${t2.predicted_per_second.toFixed(1)} t/s (1 -> 2 threads)`);
      }
    });

    test('tokenization equals llama.cpp', async () => {
      for (const c of fixture(name, 'tokenize.json')) {
        assert.deepEqual(await engine.tokenize(c.text, { addSpecial: false, parseSpecial: false }), c.ids, c.text);
        assert.deepEqual(await engine.tokenize(c.text, { addSpecial: true, parseSpecial: false }), c.ids_with_special, c.text);
      }
      for (const c of fixture(name, 'generate.json')) {
        assert.deepEqual(await engine.tokenize(c.prompt), c.prompt_ids, c.prompt);
        assert.equal(await engine.detokenize(c.generated_ids.slice(0, 8)), await engine.detokenize(c.generated_ids.slice(0, 8)));
      }
    });

    test('greedy continuations equal native superinfer run', async () => {
      for (const c of fixture(name, 'generate.json')) {
        const n = c.generated_ids.length;
        const { tokens, last } = await collect(engine.complete(c.prompt, { temperature: 0, maxTokens: n }));
        assert.ok(['stop', 'length'].includes(last.choices[0].finish_reason));
        assert.equal(last.usage.prompt_tokens, c.prompt_ids.length);
        const native = nativeRun(path(), c.prompt, n);
        const why = divergence(native, tokens, c);
        assert.equal(why, null, `${JSON.stringify(c.prompt)}: ${why}`);
        const t = last.timings;
        console.log(`${name} ${JSON.stringify(c.prompt.slice(0, 24))}: ${tokens.length} tokens, prompt ${t.prompt_per_second.toFixed(1)} t/s, decode ${t.predicted_per_second.toFixed(1)} t/s${tokens.map((x) => x.text).join('') === native ? ', identical to native' : ', parts from native at a near-tie'}`);
      }
      // the peak: wasm memory never shrinks, so its size after generating is its peak
      const { wasmBytes } = await engine.memory();
      const info = engine.info();
      const slack = wasmBytes - info.file_size - info.kv_cache_bytes;
      assert.ok(slack <= 64 << 20, `peak wasm memory ${wasmBytes} exceeds file + KV cache by ${slack} bytes (> 64 MiB)`);
    });

    test('chat streams the assistant turn through the model\'s template', async () => {
      const messages = [{ role: 'user', content: 'Say hello.' }];
      const prompt = await engine.applyChatTemplate(messages);
      assert.ok(prompt.includes('Say hello.'));
      assert.ok(prompt.includes(name === 'qwen' ? '<|im_start|>assistant' : '<start_of_turn>model'), prompt);
      const chunks = [];
      const { text, last } = await collect(engine.chat(messages, { temperature: 0, maxTokens: 12 }), (c) => chunks.push(c));
      assert.equal(chunks[0].object, 'chat.completion.chunk');
      assert.equal(chunks[0].choices[0].delta.role, 'assistant');
      assert.ok(text.length > 0);
      // BOS is added unless the rendered text already begins with it (Gemma's template writes it)
      assert.equal(last.usage.prompt_tokens, (await engine.tokenize(prompt, { addSpecial: !prompt.startsWith('<bos>') })).length);
    });

    test('ignoreEos, stop strings and maxTokens follow the rules of native run', async () => {
      let prompt = await engine.applyChatTemplate([{ role: 'user', content: 'What is 2+2? One word.' }]);
      if (prompt.startsWith('<bos>')) prompt = prompt.slice('<bos>'.length); // both add BOS
      const ask = async (opts) => {
        const { tokens, last } = await collect(engine.complete(prompt, { temperature: 0, ...opts }));
        return { tokens, text: tokens.map((t) => t.text).join(''), finish: last.choices[0].finish_reason, generated: last.usage.completion_tokens };
      };
      // the model's own end, when it ends (Qwen does; the base Gemma-3-270M goes on): an
      // end-of-generation token, not part of the answer (native run counts it as sampled;
      // completion_tokens counts the answer's tokens, as the server)
      const ends = await ask({ maxTokens: 48 });
      const nativeEnds = nativeRunWith(path(), prompt, ['-n', '48']);
      const eog = nativeEnds.stop === 'EndOfGeneration';
      assert.equal(ends.finish, eog ? 'stop' : 'length');
      assert.equal(ends.generated, ends.tokens.filter((t) => t.id !== null).length);
      if (eog) {
        assert.equal(ends.text, nativeEnds.text);
        assert.equal(ends.generated, nativeEnds.generated - 1);
      }
      // ignoreEos masks it: the answer goes on to maxTokens from where the model ended
      const longer = await ask({ maxTokens: 32, ignoreEos: true });
      assert.equal(longer.finish, 'length');
      assert.equal(longer.generated, 32);
      const start = eog ? ends.text.length : 0;
      if (eog) assert.ok(longer.text.startsWith(ends.text) && longer.text.length > ends.text.length);
      const nativeLonger = nativeRunWith(path(), prompt, ['-n', '32', '--ignore-eos']);
      assert.equal(nativeLonger.stop, 'Length');
      // past the model's end the text is the model's least likely choices: wasm and native
      // kernels round differently and may part at a near-tie there, but not at once
      let same = 0;
      while (same < longer.text.length && longer.text[same] === nativeLonger.text[same]) same++;
      assert.ok(same > start, `wasm ${JSON.stringify(longer.text)} native ${JSON.stringify(nativeLonger.text)}`);
      // a stop string that only the text past the model's end contains cuts it there
      let stop = null;
      for (let i = start + 1; i + 3 <= longer.text.length && stop === null; i++) {
        const s = longer.text.slice(i, i + 3);
        if (longer.text.indexOf(s) > start) stop = s;
      }
      assert.ok(stop !== null, longer.text);
      const cut = await ask({ maxTokens: 32, ignoreEos: true, stop: ['never here', stop] });
      assert.equal(cut.finish, 'stop');
      assert.equal(cut.text, longer.text.slice(0, longer.text.indexOf(stop)), JSON.stringify(stop));
      if (longer.text === nativeLonger.text) {
        const nativeCut = nativeRunWith(path(), prompt, ['-n', '32', '--ignore-eos', '--stop', stop]);
        assert.deepEqual([nativeCut.stop, nativeCut.text, nativeCut.generated], ['StopSequence', cut.text, cut.generated]);
      }
    });

    test('an abort ends the stream within one token, and the engine goes on', async () => {
      const prompt = fixture(name, 'generate.json')[0].prompt;
      const { text: whole } = await collect(engine.complete(prompt, { temperature: 0, maxTokens: 24 }));
      const ac = new AbortController();
      let after = 0;
      const { last } = await collect(engine.complete(prompt, { temperature: 0, maxTokens: 200, signal: ac.signal }), (c) => {
        if (c.choices[0].finish_reason !== null) return;
        if (ac.signal.aborted) after++;
        else ac.abort();
      });
      assert.equal(last.choices[0].finish_reason, 'abort');
      assert.ok(after <= 1, `${after} tokens arrived after the abort`);
      assert.ok(last.usage.completion_tokens <= 2);
      // the same greedy text afterwards (the cache was rolled back correctly)
      const { text: again } = await collect(engine.complete(prompt, { temperature: 0, maxTokens: 24 }));
      assert.equal(again, whole);
    });

    test('errors reject with a code and leave the engine usable', async () => {
      const long = 'word '.repeat(800);
      await assert.rejects(collect(engine.complete(long, { maxTokens: 4 })), { code: 'context_length_exceeded' });
      await assert.rejects(collect(engine.complete('x', { temperature: -1, topP: 7 })), { code: 'invalid_value', param: 'temperature' });
      await assert.rejects(engine.detokenize([10 ** 8]), { code: 'invalid_argument' });
      await assert.rejects(collect(engine.complete('x', { bogus: 1 })), { code: 'invalid_argument' });
      const { tokens } = await collect(engine.complete('1, 2, 3,', { temperature: 0, maxTokens: 3 }));
      assert.equal(tokens.length, 3);
    });
  });
}
