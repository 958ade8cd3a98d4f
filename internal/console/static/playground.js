// The playground: one sampling request, built from a form, sent to
// /v1/sample or a guaranteed helper, its answer streamed attempt by
// attempt.
import { request, sendJSON, getJSON, readEvents, apiKey, ApiError } from './api.js';
import { h, clear, field, spinner, jsonView, problemView, errorsTable, badge, contentText, ms, num, usd } from './ui.js';
import { curl, goProgram, openaiPython } from './snippets.js';

const personSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 0 } },
  required: ['name'],
};

const weatherTools = [{
  name: 'get_weather',
  description: 'Get the current weather of a city',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

const exampleMessages = [
  { role: 'user', content: { type: 'text', text: 'Name three rivers in France' } },
];

// What the offline models do, for the model picker.
const modelHints = {
  'offline/default': 'echoes, no network',
  'offline/flaky': 'breaks the first attempt: a guaranteed retry',
  'offline/broken': 'breaks every attempt',
  'offline/slow': 'slow: watch the answer stream in',
};

// jsonEditor is a textarea checked as the visitor types: JSON first, then
// check(value), which returns a message or ''.
function jsonEditor(id, label, initial, check, hint) {
  const area = h('textarea', { id, class: 'code', rows: 8, spellcheck: 'false' });
  area.value = JSON.stringify(initial, null, 2);
  const status = h('p', { class: 'check', 'aria-live': 'polite' });
  const wrap = field(label, area, hint);
  status.id = `${area.id}-check`;
  area.setAttribute('aria-describedby', status.id);
  wrap.append(status);
  const ed = { el: wrap, area, value: undefined, error: '' };
  const validate = () => {
    let v;
    try {
      v = JSON.parse(area.value);
    } catch (e) {
      ed.value = undefined;
      ed.error = `Not JSON: ${e.message}`;
      status.textContent = ed.error;
      status.className = 'check bad';
      area.setAttribute('aria-invalid', 'true');
      return;
    }
    const msg = check(v);
    ed.value = msg ? undefined : v;
    ed.error = msg;
    status.textContent = msg || 'Valid';
    status.className = msg ? 'check bad' : 'check good';
    if (msg) area.setAttribute('aria-invalid', 'true');
    else area.removeAttribute('aria-invalid');
  };
  area.addEventListener('input', validate);
  ed.set = (v) => { area.value = JSON.stringify(v, null, 2); validate(); };
  validate();
  return ed;
}

function checkSchema(v) {
  if (typeof v === 'boolean') return '';
  if (!v || typeof v !== 'object' || Array.isArray(v)) return 'A JSON Schema is an object (or true/false).';
  return '';
}

function checkTools(v) {
  if (!Array.isArray(v) || v.length === 0) return 'Give an array of at least one tool.';
  for (const [i, t] of v.entries()) {
    if (!t || typeof t !== 'object' || Array.isArray(t)) return `/${i}: a tool is an object.`;
    if (typeof t.name !== 'string' || !t.name) return `/${i}/name: each tool needs a name.`;
    if (t.inputSchema !== undefined && (typeof t.inputSchema !== 'object' || t.inputSchema === null || Array.isArray(t.inputSchema))) {
      return `/${i}/inputSchema: an input schema is an object.`;
    }
  }
  return '';
}

function checkMessages(v) {
  if (!Array.isArray(v) || v.length === 0) return 'Give an array of at least one message.';
  for (const [i, m] of v.entries()) {
    if (!m || typeof m !== 'object') return `/${i}: a message is an object.`;
    if (m.role !== 'user' && m.role !== 'assistant') return `/${i}/role: "user" or "assistant".`;
    if (!m.content || typeof m.content !== 'object') return `/${i}/content: a content block, or an array of blocks.`;
  }
  return '';
}

function radios(name, legend, options, value) {
  const set = h('fieldset', { class: 'radios' }, h('legend', {}, legend));
  for (const [v, label] of options) {
    const input = h('input', { type: 'radio', name, value: v, checked: v === value, id: `${name}-${v}` });
    set.append(h('label', { for: input.id }, input, ` ${label}`));
  }
  set.value = () => set.querySelector('input:checked').value;
  set.set = (v) => { set.querySelector(`input[value="${v}"]`).checked = true; };
  return set;
}

export async function playground(main, _args, signal) {
  const models = await getJSON('/v1/models', { signal });

  // The form.
  const mode = radios('pg-mode', 'Mode', [['plain', 'Plain'], ['schema', 'Schema'], ['tools', 'Tools']], 'plain');
  const guaranteed = h('input', { type: 'checkbox', id: 'pg-guaranteed', checked: true });
  const retries = h('input', { type: 'number', id: 'pg-retries', min: 0, max: 10, value: '2', class: 'short' });
  const model = h('select', { id: 'pg-model' }, models.models.map((m) => h('option', { value: m.id, selected: m.id === models.default },
    `${m.id}${m.default ? ' (default)' : ''}${modelHints[m.id] ? ` — ${modelHints[m.id]}` : ''}`)));
  const inputKind = radios('pg-input', 'Input', [['prompt', 'A prompt'], ['messages', 'A message list']], 'prompt');
  const prompt = h('textarea', { id: 'pg-prompt', rows: 3 });
  prompt.value = 'Name three rivers in France';
  const messages = jsonEditor('pg-messages', 'Messages (MCP SamplingMessage list)', exampleMessages, checkMessages);
  const system = h('input', { type: 'text', id: 'pg-system', placeholder: 'optional' });
  const schema = jsonEditor('pg-schema', 'JSON Schema of the answer', personSchema, checkSchema);
  const toolsEd = jsonEditor('pg-tools', 'Tools (MCP Tool list)', weatherTools, checkTools);
  const stream = h('input', { type: 'checkbox', id: 'pg-stream', checked: true });
  const run = h('button', { type: 'submit', class: 'primary', id: 'pg-run' }, 'Run');
  const stop = h('button', { type: 'button', id: 'pg-stop', disabled: true }, 'Stop');
  const formError = h('p', { class: 'check bad', role: 'alert', hidden: true });

  const guaranteedField = h('div', { class: 'field inline' },
    h('label', { for: guaranteed.id }, guaranteed, ' Guaranteed helper: retry with corrective feedback until the answer is valid'),
    h('span', { class: 'field inline' }, h('label', { for: retries.id }, 'Retries '), retries));
  const promptField = field('Prompt', prompt);

  const preset = (label, apply) => h('button', { type: 'button', class: 'quiet', onclick: () => { apply(); sync(); } }, label);
  const pick = (id) => { if (models.models.some((m) => m.id === id)) model.value = id; };
  const presets = h('div', { class: 'presets' }, h('span', {}, 'Try: '),
    preset('a guaranteed retry', () => {
      mode.set('schema'); guaranteed.checked = true; inputKind.set('prompt'); pick('offline/flaky');
      prompt.value = 'A person'; schema.set(personSchema);
    }),
    preset('a slow stream', () => {
      mode.set('plain'); inputKind.set('prompt'); pick('offline/slow'); stream.checked = true;
      prompt.value = 'Name three rivers in France';
    }),
    preset('a tool call', () => {
      mode.set('tools'); guaranteed.checked = true; inputKind.set('prompt'); pick('offline/flaky');
      prompt.value = 'What is the weather in Paris?'; toolsEd.set(weatherTools);
    }));

  const form = h('form', { id: 'pg-form', class: 'panel', 'aria-label': 'Sampling request', novalidate: true },
    presets, mode, guaranteedField, field('Model', model), inputKind, promptField, messages.el,
    field('System prompt', system), schema.el, toolsEd.el,
    h('div', { class: 'field inline' }, h('label', { for: stream.id }, stream, ' Stream the answer as it is made')),
    formError,
    h('div', { class: 'actions' }, run, stop, h('span', { class: 'hint' }, 'Ctrl+Enter runs')));

  // Copy as.
  const snippet = h('pre', { class: 'code snippet', tabindex: '0', id: 'pg-snippet' });
  const copied = h('span', { class: 'hint', 'aria-live': 'polite' });
  let snippetKind = 'curl';
  const kinds = [['curl', 'curl'], ['go', 'Go client'], ['openai', 'OpenAI SDK (Python)']];
  const kindButtons = kinds.map(([k, label]) => h('button', { type: 'button', class: 'tab', 'data-kind': k, 'aria-pressed': String(k === snippetKind),
    onclick: () => { snippetKind = k; for (const b of kindButtons) b.setAttribute('aria-pressed', String(b.dataset.kind === k)); renderSnippet(); } }, label));
  const copy = h('button', { type: 'button', onclick: async () => {
    try {
      await navigator.clipboard.writeText(snippet.textContent);
      copied.textContent = 'Copied.';
    } catch {
      const range = document.createRange();
      range.selectNodeContents(snippet);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      copied.textContent = 'Selected: press Ctrl+C to copy.';
    }
  } }, 'Copy');
  const copyPanel = h('section', { class: 'panel', 'aria-labelledby': 'pg-copy-title' },
    h('h2', { id: 'pg-copy-title' }, 'Copy as'), h('div', { class: 'tabs' }, kindButtons, copy, copied), snippet);

  // The answer.
  const status = h('div', { class: 'status', id: 'pg-status' });
  const attemptsEl = h('div', { id: 'pg-attempts' });
  const resultEl = h('div', { id: 'pg-result' });
  const out = h('section', { class: 'panel output', id: 'pg-output', 'aria-labelledby': 'pg-out-title', 'data-state': 'idle' },
    h('h2', { id: 'pg-out-title' }, 'Answer'), status, attemptsEl, resultEl);

  clear(main,
    h('h1', {}, 'Playground'),
    h('p', { class: 'lead' }, 'Send one sampling request. A guaranteed helper checks the answer and, when it is not valid, sends it back with the errors until it is: each attempt shows below.'),
    h('div', { class: 'columns' }, h('div', {}, form, copyPanel), out));

  // build is the request the form describes: its path and body, or an
  // error message.
  function build() {
    const m = mode.value();
    const g = m !== 'plain' && guaranteed.checked;
    const body = {};
    if (inputKind.value() === 'prompt') {
      if (!prompt.value.trim()) return { error: 'Type a prompt.' };
      body.prompt = prompt.value;
    } else {
      if (messages.value === undefined) return { error: `Messages: ${messages.error}` };
      body.messages = messages.value;
    }
    if (system.value.trim()) body.systemPrompt = system.value;
    body.model = model.value;
    if (m === 'schema') {
      if (schema.value === undefined) return { error: `Schema: ${schema.error}` };
      body.schema = schema.value;
    }
    if (m === 'tools') {
      if (toolsEd.value === undefined) return { error: `Tools: ${toolsEd.error}` };
      body.tools = toolsEd.value;
    }
    if (g) {
      const n = Number(retries.value);
      if (!Number.isInteger(n) || n < 0 || n > 10) return { error: 'Retries: a whole number from 0 to 10.' };
      body.retries = n;
    }
    const path = !g ? '/v1/sample' : (m === 'schema' ? '/v1/sample/schema' : '/v1/sample/tools');
    return { path, body, guaranteed: g, stream: stream.checked };
  }

  function renderSnippet() {
    const req = build();
    if (req.error) {
      snippet.textContent = `# ${req.error}`;
      return;
    }
    const key = Boolean(apiKey());
    const origin = location.origin;
    if (snippetKind === 'curl') snippet.textContent = curl(origin, req.path, req.stream ? { ...req.body, stream: true } : req.body, { stream: req.stream, key });
    else if (snippetKind === 'go') snippet.textContent = goProgram(origin, req.path, req.body, { key });
    else snippet.textContent = openaiPython(origin, req.body, { toolsRequired: req.path === '/v1/sample/tools' });
  }

  // sync shows the fields the mode and input kind use.
  function sync() {
    const m = mode.value();
    guaranteedField.hidden = m === 'plain';
    retries.disabled = !guaranteed.checked;
    schema.el.hidden = m !== 'schema';
    toolsEd.el.hidden = m !== 'tools';
    const useMessages = inputKind.value() === 'messages';
    promptField.hidden = useMessages;
    messages.el.hidden = !useMessages;
    const req = build();
    formError.hidden = !req.error;
    formError.textContent = req.error || '';
    run.disabled = Boolean(req.error) || busy;
    renderSnippet();
  }

  let busy = false;
  let ctl = null;
  signal.addEventListener('abort', () => ctl?.abort());

  form.addEventListener('input', sync);
  form.addEventListener('change', sync);
  form.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  stop.addEventListener('click', () => ctl?.abort());
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const req = build();
    if (req.error || busy) return;
    send(req);
  });
  sync();

  async function send(req) {
    busy = true;
    run.disabled = true;
    stop.disabled = false;
    ctl = new AbortController();
    const spin = spinner('Sampling…');
    clear(status, spin.el);
    clear(attemptsEl);
    clear(resultEl);
    out.dataset.state = 'running';
    const t0 = performance.now();
    let first = null;
    const boxes = new Map();
    let ended = false;

    const box = (n) => {
      if (boxes.has(n)) return boxes.get(n);
      const text = h('pre', { class: 'answer', 'aria-live': 'off' });
      const mark = h('span', { class: 'mark' }, badge('streaming', 'running'));
      const section = h('section', { class: 'attempt', 'data-attempt': String(n), 'data-outcome': 'streaming' },
        h('h3', {}, `Attempt ${n} `, mark), text);
      const b = { section, text, mark, calls: [], callsEl: null };
      boxes.set(n, b);
      attemptsEl.append(section);
      return b;
    };
    const outcome = (b, word) => {
      b.section.dataset.outcome = word;
      clear(b.mark, badge(word));
    };

    const onEvent = (ev) => {
      let data;
      try {
        data = JSON.parse(ev.data);
      } catch {
        return;
      }
      switch (ev.event) {
        case 'delta': {
          if (first === null) first = performance.now() - t0;
          const b = box(data.attempt);
          if (data.text) b.text.append(data.text);
          if (data.toolCall) {
            const c = data.toolCall;
            if (!b.calls[c.index]) {
              const args = h('code', {});
              b.calls[c.index] = args;
              if (!b.callsEl) {
                b.callsEl = h('ul', { class: 'calls' });
                b.section.append(b.callsEl);
              }
              b.callsEl.append(h('li', {}, h('strong', {}, c.name), ' ', args));
            }
            if (c.arguments) b.calls[c.index].append(c.arguments);
          }
          break;
        }
        case 'attempt': {
          const prev = box(data.attempt - 1);
          outcome(prev, 'failed');
          prev.section.append(h('h4', {}, 'Why it failed'), errorsTable(data.errors));
          if (data.correction) {
            prev.section.append(h('div', { class: 'correction' },
              h('h4', {}, `Corrective turn sent before attempt ${data.attempt}`),
              h('pre', { class: 'answer' }, contentText(data.correction.content))));
          }
          box(data.attempt);
          break;
        }
        case 'result':
          ended = true;
          showResult(data, req, boxes, outcome, box);
          break;
        case 'error': {
          ended = true;
          const last = boxes.get(Math.max(0, ...boxes.keys()));
          if (last) {
            outcome(last, 'failed');
            if (data.errors) last.section.append(h('h4', {}, 'Why it failed'), errorsTable(data.errors));
          }
          resultEl.append(problemView(new ApiError(data.status, data)));
          break;
        }
        default:
          break;
      }
    };

    const timings = () => h('p', { class: 'timings' },
      first !== null ? `First fragment after ${ms(first)}, ` : '', `complete after ${ms(performance.now() - t0)} (measured here)`);
    try {
      if (req.stream) {
        const res = await request('POST', req.path, { body: { ...req.body, stream: true }, headers: { Accept: 'text/event-stream' }, signal: ctl.signal });
        await readEvents(res, onEvent);
        if (!ended) throw new Error('the stream ended before its result');
      } else {
        const res = await sendJSON('POST', req.path, req.body, { signal: ctl.signal });
        showResult(res, req, boxes, outcome, box);
      }
      spin.stop(`Done in ${ms(performance.now() - t0)}`);
      resultEl.append(timings());
    } catch (err) {
      if (ctl.signal.aborted) {
        spin.stop(`Stopped after ${ms(performance.now() - t0)}`);
      } else {
        spin.stop(`Failed after ${ms(performance.now() - t0)}`);
        if (err instanceof ApiError && err.problem && err.problem.lastResult) {
          resultEl.append(h('h3', {}, 'Last answer'), h('pre', { class: 'answer' }, err.problem.lastResult.text || ''));
        }
        resultEl.prepend(problemView(err));
      }
    } finally {
      for (const b of boxes.values()) if (b.section.dataset.outcome === 'streaming') outcome(b, ctl.signal.aborted ? 'stopped' : 'unfinished');
      out.dataset.state = 'done';
      busy = false;
      stop.disabled = true;
      sync();
    }
  }

  function showResult(res, req, boxes, outcome, box) {
    const last = box(res.attempts || 1);
    if (!req.stream && !last.text.textContent) last.text.textContent = res.text;
    const valid = !res.parseError;
    const checked = req.body.schema !== undefined || req.body.tools !== undefined;
    outcome(last, !checked ? 'answered' : (valid ? 'passed' : 'invalid'));
    for (const [n, b] of boxes) if (n < (res.attempts || 1) && b.section.dataset.outcome === 'streaming') outcome(b, 'failed');
    const u = res.usage || {};
    const facts = [
      ['Model', `${res.model} (${res.provider})`],
      ['Attempts', String(res.attempts)],
      ['Stop reason', res.stopReason || ''],
      ['Tokens', `${num(u.inputTokens)} in, ${num(u.outputTokens)} out`],
      ['Cost', `${usd(u.costUsd || 0)}${u.unpriced ? ' (a model without a price was called)' : ''}`],
      ['Time at the service', ms(res.durationMs)],
    ];
    resultEl.append(h('h3', {}, 'Result'),
      h('dl', { class: 'facts', id: 'pg-facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
    if ('parsed' in res && res.parsed !== null) {
      resultEl.append(h('h3', {}, 'Parsed value'), h('div', { id: 'pg-parsed' }, jsonView(res.parsed)));
    }
    if (res.parseError) {
      resultEl.append(h('h3', {}, 'Not a valid value'), h('p', {}, res.parseError.message), errorsTable(res.parseError.errors));
    }
    if (Array.isArray(res.toolCalls)) {
      resultEl.append(h('h3', {}, 'Tool calls'), res.toolCalls.length === 0 ? h('p', {}, 'None.')
        : h('ul', { class: 'calls' }, res.toolCalls.map((c) => h('li', {}, h('strong', {}, c.name), jsonView(c.arguments)))));
    }
  }
}
