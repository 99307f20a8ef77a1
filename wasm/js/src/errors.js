// Typed errors: every rejected promise of the package carries one of these codes.

/** @type {readonly string[]} */
export const ERROR_CODES = Object.freeze([
  'not_gguf', // the bytes are not a GGUF file (or a GGUF version this build does not read)
  'truncated', // the download or file ended before the bytes its header announces
  'corrupt_gguf', // a GGUF header that contradicts itself
  'unsupported_model', // an architecture (or layout) this build does not run
  'unsupported_tensor_type', // a quantization type this build cannot compute with
  'too_large', // more memory than wasm32's 4 GB (found from the size or the header)
  'network', // fetch failed, or the server answered with an error status
  'context_length_exceeded', // the prompt (or prompt + answer) does not fit in nCtx
  'invalid_argument', // a bad option or request
  'invalid_type', // a request field of the wrong type (`param` names it), as the server says
  'invalid_value', // a request field out of range or not supported (`param` names it)
  'missing_required_parameter', // a request without its prompt or messages
  'invalid_schema', // a response format's JSON schema (or a tool's parameters) is not a valid schema
  'unsupported_schema_keyword', // a schema keyword the engine cannot enforce (`param` names the keyword)
  'invalid_grammar', // a `grammar` (GBNF) that does not parse
  'grammar_too_large', // a schema or grammar past the engine's limits (size, nesting, compile work)
  'unknown_tool', // `toolChoice` names a function `tools` does not hold
  'template', // the chat template failed to render these messages
  'tokenizer',
  'no_model',
  'disposed', // the engine was disposed
  'internal', // the engine crashed (a bug): load the model again
]);

export class SuperinferError extends Error {
  /**
   * @param {string} code one of ERROR_CODES
   * @param {string} message
   * @param {string} [param] the request field a bad request is about
   */
  constructor(code, message, param) {
    super(message);
    this.name = 'SuperinferError';
    this.code = code;
    if (param != null) this.param = param;
  }

  /** @param {{code: string, message: string, param?: string}} e */
  static from(e) {
    return new SuperinferError(e.code, e.message, e.param);
  }

  toJSON() {
    return this.param == null ? { code: this.code, message: this.message } : { code: this.code, message: this.message, param: this.param };
  }
}

/** Any thrown value as `{code, message}` for posting between threads. */
export function serializeError(e) {
  if (e instanceof SuperinferError) return e.toJSON();
  if (e instanceof WebAssembly.RuntimeError) {
    return { code: 'internal', message: `the engine crashed (${e.message}); load the model again` };
  }
  return { code: 'internal', message: String(e && e.stack ? e.stack : e) };
}
