// Structured output and tool calls through the package, as the server gives them (issue
// 35): `responseFormat` answers that parse and fit their schema (greedy and sampled, whole
// and streamed), a GBNF `grammar`, typed errors for a schema or grammar the engine cannot
// enforce (with `param`), and tool calls in the model's own format returned as OpenAI's
// `tool_calls` (finish_reason `tool_calls`), whose streamed deltas concatenate to the whole
// answer's; on Qwen2.5 (Hermes `<tool_call>` format), one thread, and the threaded build
// (the grammar's masks computed inline there: wasm has no thread to spawn) giving the same.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { load, ERROR_CODES } from 'superinfer';
import { env, MODELS } from './helpers.mjs';

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    role: { enum: ['engineer', 'doctor', 'teacher'] },
    skills: { type: 'array', items: { type: 'string', maxLength: 30 }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'age', 'role', 'skills'],
  additionalProperties: false,
};

/** The schema's rules, checked by hand (the fields, their types, ranges, enums and bounds). */
function fitsPerson(v) {
  assert.equal(typeof v, 'object');
  assert.deepEqual(Object.keys(v).sort(), ['age', 'name', 'role', 'skills']);
  assert.equal(typeof v.name, 'string');
  assert.ok(v.name.length <= 40, v.name);
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 150, String(v.age));
  assert.ok(['engineer', 'doctor', 'teacher'].includes(v.role), v.role);
  assert.ok(Array.isArray(v.skills) && v.skills.length >= 1 && v.skills.length <= 3, JSON.stringify(v.skills));
  for (const s of v.skills) assert.ok(typeof s === 'string' && s.length <= 30, s);
}

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: 'function',
  function: { name: 'get_time', description: 'The time now in a timezone', parameters: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] } },
};

/** A chat stream read into its content, reasoning and calls (the deltas concatenated by index). */
async function readStream(stream) {
  let content = '';
  let reasoning = '';
  const calls = [];
  let last = null;
  for await (const c of stream) {
    const d = c.choices[0].delta;
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const t of d.tool_calls ?? []) {
      if (t.id !== undefined) {
        assert.equal(calls[t.index], undefined, 'a call\'s id and name come once, in its first delta');
        assert.equal(t.type, 'function');
        calls[t.index] = { id: t.id, type: 'function', function: { name: t.function.name, arguments: '' } };
      }
      assert.ok(calls[t.index], 'arguments after the call\'s first delta');
      assert.equal(t.function.name === undefined || t.id !== undefined, true, 'the name only in the first delta');
      calls[t.index].function.arguments += t.function.arguments;
    }
    last = c;
  }
  return { content, reasoning, calls, finish: last.choices[0].finish_reason, last };
}

describe('qwen', () => {
  let engine;

  before(async () => {
    engine = await load(env(MODELS.qwen.env), { nCtx: 1024, threads: 1 });
  });

  after(async () => {
    await engine?.dispose();
  });

  test('a JSON-schema answer parses and fits its schema, greedy and sampled, whole and streamed', async () => {
    const messages = [{ role: 'user', content: 'Describe a fictional person who works in a hospital.' }];
    const responseFormat = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };
    const whole = await engine.chatCompletion(messages, { temperature: 0, maxTokens: 200, responseFormat });
    const msg = whole.choices[0].message;
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].finish_reason, 'stop', 'the answer ends when the value is complete');
    fitsPerson(JSON.parse(msg.content));
    console.log(`json_schema greedy: ${msg.content} (${whole.usage.completion_tokens} tokens, ${whole.timings.predicted_per_second.toFixed(1)} t/s)`);
    // the same request streamed: the same text
    const streamed = await readStream(engine.chat(messages, { temperature: 0, maxTokens: 200, responseFormat }));
    assert.equal(streamed.content, msg.content);
    assert.equal(streamed.finish, 'stop');
    for (const seed of [1, 2, 3]) {
      const r = await engine.chatCompletion(messages, { temperature: 1, seed, maxTokens: 200, responseFormat });
      fitsPerson(JSON.parse(r.choices[0].message.content));
    }
    // json_object: any object
    const obj = await engine.chatCompletion([{ role: 'user', content: 'Give me a JSON object about cats.' }], {
      temperature: 0, maxTokens: 120, responseFormat: { type: 'json_object' },
    });
    const v = JSON.parse(obj.choices[0].message.content);
    assert.ok(v && typeof v === 'object' && !Array.isArray(v), obj.choices[0].message.content);
  });

  test('a GBNF grammar holds a completion', async () => {
    const grammar = 'root ::= ("yes" | "no") "."';
    const text = [];
    for await (const c of engine.complete('Is the sky blue? Answer:', { temperature: 0, maxTokens: 10, grammar })) {
      text.push(c.choices[0].text);
    }
    assert.match(text.join(''), /^(yes|no)\.$/);
  });

  test('a schema or grammar the engine cannot enforce rejects with its code and param', async () => {
    const chat = (opts) => engine.chatCompletion([{ role: 'user', content: 'hi' }], { maxTokens: 4, ...opts });
    const schema = (s) => ({ responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: s } } });
    await assert.rejects(chat(schema({ type: 'nonsense' })), { name: 'SuperinferError', code: 'invalid_schema', param: 'response_format' });
    await assert.rejects(chat(schema({ type: 'string', format: 'no-such-format' })), { code: 'unsupported_schema_keyword', param: 'format' });
    await assert.rejects(chat(schema(false)), { code: 'invalid_schema', param: 'response_format.json_schema.schema' });
    await assert.rejects(chat({ responseFormat: { type: 'yaml' } }), { code: 'invalid_value', param: 'response_format.type' });
    await assert.rejects(chat({ grammar: 'root ::= x' }), { code: 'invalid_grammar', param: 'grammar' });
    await assert.rejects(chat({ tools: [WEATHER], toolChoice: { type: 'function', function: { name: 'nope' } } }), (e) => {
      assert.equal(e.code, 'unknown_tool');
      assert.equal(e.param, 'tool_choice');
      assert.match(e.message, /'nope'.*get_weather/);
      return true;
    });
    await assert.rejects(chat({ tools: [WEATHER], responseFormat: { type: 'json_object' } }), { code: 'invalid_value', param: 'response_format' });
    // tools are for chats
    await assert.rejects(async () => { for await (const _ of engine.complete('x', { tools: [WEATHER] })); }, { code: 'invalid_value', param: 'tools' });
    for (const code of ['invalid_schema', 'unsupported_schema_keyword', 'invalid_grammar', 'grammar_too_large', 'unknown_tool']) {
      assert.ok(ERROR_CODES.includes(code), code);
    }
    // the engine goes on after them
    const r = await chat({ temperature: 0 });
    assert.equal(typeof r.choices[0].message.content, 'string');
  });

  test('a named tool choice returns its call as tool_calls; the streamed deltas concatenate to the whole answer', async () => {
    const messages = [{ role: 'user', content: 'What is the weather like in Paris, in celsius?' }];
    const opts = { temperature: 0, seed: 7, maxTokens: 100, tools: [WEATHER, TIME], toolChoice: { type: 'function', function: { name: 'get_weather' } } };
    const whole = await engine.chatCompletion(messages, opts);
    const choice = whole.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1, JSON.stringify(choice.message));
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.match(call.id, /^[A-Za-z0-9]{9}$/);
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    console.log(`named tool call: ${JSON.stringify(call)}`);
    const streamed = await readStream(engine.chat(messages, opts));
    assert.equal(streamed.finish, 'tool_calls');
    assert.equal(streamed.content, '');
    assert.deepEqual(streamed.calls, choice.message.tool_calls);

    // the next turn: the call and its result rendered by the template, a text answer
    const next = [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18, "sky": "clear"}' }];
    const prompt = await engine.applyChatTemplate(next, { tools: [WEATHER, TIME] });
    assert.match(prompt, /<tool_call>[\s\S]*get_weather[\s\S]*<\/tool_call>/);
    assert.match(prompt, /<tool_response>\n\{"temperature": 18/);
    const answer = await engine.chatCompletion(next, { temperature: 0, maxTokens: 40, tools: [WEATHER, TIME] });
    assert.equal(typeof answer.choices[0].message.content, 'string');
    assert.ok(answer.choices[0].message.content.length > 0);
  });

  test('the threaded build gives the same constrained answers', async () => {
    const threaded = await load(env(MODELS.qwen.env), { nCtx: 1024, threads: 2 });
    try {
      assert.equal(threaded.info().threads, 2);
      const messages = [{ role: 'user', content: 'What is the weather like in Paris, in celsius?' }];
      const opts = { temperature: 0, seed: 7, maxTokens: 100, tools: [WEATHER, TIME], toolChoice: { type: 'function', function: { name: 'get_weather' } } };
      const [a, b] = [await engine.chatCompletion(messages, opts), await threaded.chatCompletion(messages, opts)];
      assert.deepEqual(b.choices, a.choices);
      const rf = { temperature: 0, maxTokens: 200, responseFormat: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } } };
      const person = [{ role: 'user', content: 'Describe a fictional teacher.' }];
      const [c, d] = [await engine.chatCompletion(person, rf), await threaded.chatCompletion(person, rf)];
      assert.equal(d.choices[0].message.content, c.choices[0].message.content);
      fitsPerson(JSON.parse(d.choices[0].message.content));
    } finally {
      await threaded.dispose();
    }
  });

  test('toolChoice required forces a call; none leaves text', async () => {
    const messages = [{ role: 'user', content: 'What time is it in Tokyo?' }];
    const r = await engine.chatCompletion(messages, { temperature: 0, maxTokens: 100, tools: [WEATHER, TIME], toolChoice: 'required', parallelToolCalls: false });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const calls = r.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    assert.ok(['get_weather', 'get_time'].includes(calls[0].function.name));
    JSON.parse(calls[0].function.arguments);
    const none = await engine.chatCompletion(messages, { temperature: 0, maxTokens: 30, tools: [WEATHER, TIME], toolChoice: 'none' });
    assert.equal(none.choices[0].message.tool_calls, undefined);
    assert.notEqual(none.choices[0].finish_reason, 'tool_calls');
  });
});
