// Loops: the runs list, a form to start one, and a run's live timeline
// read from its event stream.
import { request, getJSON, sendJSON, readEvents, ApiError } from './api.js';
import { h, clear, field, spinner, jsonView, problemView, badge, contentText, when, ms, num, usd } from './ui.js';

export async function loops(main, args, signal) {
  if (args[0]) return runView(main, args[0], signal);
  return listView(main, signal);
}

const statuses = ['running', 'completed', 'max_iterations', 'timeout', 'cancelled', 'failed'];

function origin(o) {
  if (!o) return '';
  let s = o.kind === 'mcp' ? `MCP server ${o.server || '?'}` : 'HTTP';
  if (o.depth) s += `, nested (depth ${o.depth})`;
  return s;
}

async function listView(main, signal) {
  const [models, toolList] = await Promise.all([getJSON('/v1/models', { signal }), getJSON('/v1/tools', { signal })]);

  // The start form.
  const prompt = h('textarea', { id: 'lp-prompt', rows: 3 });
  prompt.value = 'Please calculate 2 * (3 + 4)';
  const slow = models.models.some((m) => m.id === 'offline/slow');
  const model = h('select', { id: 'lp-model' }, models.models.map((m) => h('option', {
    value: m.id, selected: slow ? m.id === 'offline/slow' : m.id === models.default,
  }, `${m.id}${m.default ? ' (default)' : ''}`)));
  const iterations = h('input', { type: 'number', id: 'lp-iterations', min: 1, max: 100, value: '5', class: 'short' });
  const deltas = h('input', { type: 'checkbox', id: 'lp-deltas', checked: true });
  const toolBoxes = toolList.tools.map((t) => h('input', { type: 'checkbox', value: t.name, id: `lp-tool-${t.name}` }));
  const globs = h('input', { type: 'text', id: 'lp-globs', placeholder: 'e.g. std__*, git__log' });
  const start = h('button', { type: 'submit', class: 'primary', id: 'lp-start' }, 'Start the loop');
  const formOut = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'panel', id: 'lp-form', 'aria-labelledby': 'lp-form-title', novalidate: true },
    h('h2', { id: 'lp-form-title' }, 'Start a loop'),
    field('Prompt', prompt),
    field('Model', model, 'offline/slow takes 2 s a model call: time to watch the run and cancel it.'),
    h('fieldset', { class: 'tools-pick' }, h('legend', {}, 'Allowed tools (none ticked and no pattern: every tool)'),
      toolList.tools.map((t, i) => h('label', { for: toolBoxes[i].id }, toolBoxes[i], ` ${t.name}`)),
      field('Or name patterns, comma-separated', globs)),
    field('Most iterations', iterations),
    h('div', { class: 'field inline' }, h('label', { for: deltas.id }, deltas, ' Record the model\'s answer as it streams (model.delta events)')),
    h('div', { class: 'actions' }, start), formOut);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { prompt: prompt.value, model: model.value, maxIterations: Number(iterations.value), streamDeltas: deltas.checked };
    const allowed = toolBoxes.filter((b) => b.checked).map((b) => b.value)
      .concat(globs.value.split(',').map((s) => s.trim()).filter(Boolean));
    if (allowed.length) body.allowedTools = allowed;
    start.disabled = true;
    const spin = spinner('Starting…');
    clear(formOut, spin.el);
    try {
      const created = await sendJSON('POST', '/v1/loops', body, { signal });
      spin.stop('Started.');
      location.hash = `#/loops/${encodeURIComponent(created.id)}`;
    } catch (err) {
      if (signal.aborted) return;
      spin.stop('');
      clear(formOut, problemView(err));
    } finally {
      start.disabled = false;
    }
  });

  // The runs list, a page at a time.
  const status = h('select', { id: 'lp-status' }, h('option', { value: '' }, 'any status'), statuses.map((s) => h('option', { value: s }, s)));
  const refresh = h('button', { type: 'button', id: 'lp-refresh' }, 'Refresh');
  const newer = h('button', { type: 'button', id: 'lp-newer', disabled: true }, '← Newer');
  const older = h('button', { type: 'button', id: 'lp-older', disabled: true }, 'Older →');
  const pageInfo = h('span', { class: 'hint' });
  const tbody = h('tbody', { id: 'lp-runs' });
  const listOut = h('div', { 'aria-live': 'polite' });
  const list = h('section', { class: 'panel', 'aria-labelledby': 'lp-list-title' },
    h('h2', { id: 'lp-list-title' }, 'Runs'),
    h('div', { class: 'toolbar' }, field('Status', status), refresh),
    h('div', { class: 'scroll' }, h('table', { class: 'runs' },
      h('thead', {}, h('tr', {}, ['Run', 'Status', 'Model', 'Iterations', 'Started', 'Origin', 'Result'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)),
    listOut,
    h('div', { class: 'pager' }, newer, pageInfo, older));

  clear(main, h('h1', {}, 'Loops'),
    h('p', { class: 'lead' }, 'A loop lets the model call tools until it answers in text. Start one, then follow it live.'),
    h('div', { class: 'columns' }, form, list));

  const cursors = ['']; // the cursor of each page seen, the first page's empty
  let page = 0;
  let next = '';
  async function load() {
    const q = new URLSearchParams({ limit: '20' });
    if (status.value) q.set('status', status.value);
    if (cursors[page]) q.set('cursor', cursors[page]);
    const spin = spinner('Loading…');
    clear(listOut, spin.el);
    try {
      const res = await getJSON(`/v1/loops?${q}`, { signal });
      spin.stop('');
      clear(listOut);
      next = res.next || '';
      clear(tbody, res.loops.length === 0 ? h('tr', {}, h('td', { colspan: '7' }, 'No runs.')) : res.loops.map((r) => h('tr', { 'data-run': r.id },
        h('td', {}, h('a', { href: `#/loops/${encodeURIComponent(r.id)}` }, h('code', {}, r.id))),
        h('td', {}, badge(r.status)),
        h('td', {}, r.model || ''),
        h('td', {}, `${r.iterations} / ${r.maxIterations}`),
        h('td', {}, h('time', { datetime: r.createdAt }, when(r.createdAt))),
        h('td', {}, origin(r.origin)),
        h('td', { class: 'clip' }, r.result || r.error || ''))));
      newer.disabled = page === 0;
      older.disabled = !next;
      pageInfo.textContent = `Page ${page + 1}`;
    } catch (err) {
      if (signal.aborted) return;
      spin.stop('');
      clear(listOut, problemView(err));
    }
  }
  status.addEventListener('change', () => { cursors.length = 1; page = 0; load(); });
  refresh.addEventListener('click', () => load());
  older.addEventListener('click', () => { if (!next) return; cursors[page + 1] = next; page += 1; load(); });
  newer.addEventListener('click', () => { if (page > 0) { page -= 1; load(); } });
  await load();
}

function sleep(n, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, n);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// shown are the members of each event's data that the timeline lays out.
const shown = {
  'loop.started': ['id', 'traceId', 'origin', 'model', 'tools', 'maxIterations', 'timeoutMs'],
  'model.completed': ['iteration', 'model', 'stopReason', 'text', 'toolCalls', 'usage', 'durationMs'],
  'tool.started': ['iteration', 'callId', 'name', 'arguments'],
  'tool.completed': ['iteration', 'callId', 'name', 'isError', 'content', 'structuredContent', 'durationMs'],
  'tool.sampling': ['iteration', 'callId', 'name', 'model', 'run', 'usage'],
  'iteration.completed': ['traceId', 'iteration', 'toolCalls', 'durationMs'],
  'loop.completed': ['traceId', 'status', 'totalIterations', 'success', 'durationMs', 'result', 'error', 'usage'],
};

// nested links the run a tool call started (agent_delegate's runId), a
// loop nested in this one.
function nested(sc) {
  if (!sc || typeof sc.runId !== 'string' || !sc.runId) return null;
  return h('p', { class: 'nested' }, 'Nested run: ', h('a', { href: `#/loops/${encodeURIComponent(sc.runId)}` }, h('code', {}, sc.runId)),
    typeof sc.iterations === 'number' ? ` (${sc.iterations} iteration${sc.iterations === 1 ? '' : 's'}${sc.stopReason ? `, ${sc.stopReason}` : ''})` : '');
}

async function runView(main, id, signal) {
  const path = `/v1/loops/${encodeURIComponent(id)}`;
  const run = await getJSON(path, { signal });

  const statusEl = h('span', { id: 'loop-status', 'data-status': run.status }, badge(run.status));
  const progress = h('span', { id: 'loop-progress' });
  const busyEl = h('span', {});
  const conn = h('span', { id: 'loop-conn', class: 'hint', 'data-state': 'connecting', 'aria-live': 'polite' }, 'Connecting…');
  const cancel = h('button', { type: 'button', id: 'loop-cancel', class: 'danger', disabled: run.status !== 'running' }, 'Cancel the run');
  const cancelOut = h('span', { 'aria-live': 'polite' });
  const timeline = h('ol', { id: 'timeline', class: 'timeline', 'aria-label': 'Events of the run' });
  let maxIterations = run.maxIterations;
  let iterations = run.iterations;
  const showProgress = () => { progress.textContent = `Iterations: ${iterations} / ${maxIterations}`; };
  showProgress();

  clear(main,
    h('p', {}, h('a', { href: '#/loops' }, '← All runs')),
    h('h1', {}, 'Run ', h('code', {}, run.id)),
    h('div', { class: 'panel run-head' },
      h('dl', { class: 'facts' },
        h('dt', {}, 'Status'), h('dd', {}, statusEl, ' ', busyEl),
        h('dt', {}, 'Progress'), h('dd', {}, progress),
        h('dt', {}, 'Model'), h('dd', { id: 'loop-model' }, run.model || '(not answered yet)'),
        h('dt', {}, 'Started'), h('dd', {}, h('time', { datetime: run.createdAt }, when(run.createdAt))),
        h('dt', {}, 'Origin'), h('dd', {}, origin(run.origin)),
        run.owner ? [h('dt', {}, 'Owner'), h('dd', {}, run.owner)] : null,
        h('dt', {}, 'Tools'), h('dd', {}, run.tools.length ? run.tools.join(', ') : 'none'),
        h('dt', {}, 'Events'), h('dd', {}, conn)),
      h('div', { class: 'actions' }, cancel, cancelOut)),
    h('h2', {}, 'Timeline'),
    timeline);

  let spin = null;
  const setStatus = (s) => {
    statusEl.dataset.status = s;
    clear(statusEl, badge(s));
    cancel.disabled = s !== 'running';
    if (s === 'running' && !spin) {
      spin = spinner('for', { since: Date.parse(run.createdAt) });
      clear(busyEl, spin.el);
    } else if (s !== 'running' && spin) {
      spin.stop('');
      spin = null;
    }
  };
  setStatus(run.status);
  signal.addEventListener('abort', () => spin?.stop(''));

  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    clear(cancelOut, 'Cancelling…');
    try {
      await sendJSON('DELETE', path, undefined, { signal });
      clear(cancelOut, 'Cancelling: the run ends at its next step.');
    } catch (err) {
      if (signal.aborted) return;
      clear(cancelOut, err instanceof ApiError && err.status === 409 ? 'The run had already ended.' : problemView(err));
    }
  });

  // The timeline, one row per event; a model's streamed fragments grow
  // one row per iteration until its model.completed replaces it.
  const live = new Map();
  const toolRows = new Map();
  const row = (ev, kind, title, ...body) => h('li', { class: `row ev-${kind}`, 'data-event-id': ev.id, 'data-event': ev.event },
    h('div', { class: 'row-head' }, h('span', { class: 'ev-id', 'aria-label': `event ${ev.id}` }, `#${ev.id}`), ' ', title), ...body);
  const usageText = (u) => (u ? `${num(u.inputTokens)} tokens in, ${num(u.outputTokens)} out, ${usd(u.costUsd || 0)}` : '');

  const apply = (ev, d) => {
    render(ev, d);
    // Members this page does not lay out (ones the API gained since) are
    // shown as they are, folded.
    const known = shown[ev.event];
    const el = timeline.querySelector(`[data-event-id="${ev.id}"]`);
    if (known && el) {
      const rest = Object.fromEntries(Object.entries(d).filter(([k]) => !known.includes(k)));
      if (Object.keys(rest).length) el.append(h('details', { class: 'more' }, h('summary', {}, 'More'), jsonView(rest)));
    }
  };
  const render = (ev, d) => {
    switch (ev.event) {
      case 'loop.started':
        maxIterations = d.maxIterations;
        showProgress();
        timeline.append(row(ev, 'started', h('strong', {}, 'Started'),
          h('p', {}, `Model ${d.model || '(chosen by the service)'}; at most ${d.maxIterations} iterations, ${ms(d.timeoutMs)}; tools: ${d.tools.join(', ') || 'none'}.`)));
        break;
      case 'model.delta': {
        let r = live.get(d.iteration);
        if (!r) {
          const text = h('pre', { class: 'answer' });
          r = { el: h('li', { class: 'row ev-model-live', 'data-iteration': String(d.iteration) },
            h('div', { class: 'row-head' }, h('strong', {}, `Model answering (iteration ${d.iteration})`)), text), text, calls: [] };
          live.set(d.iteration, r);
          timeline.append(r.el);
        }
        if (d.text) r.text.append(d.text);
        if (d.toolCall) {
          if (!r.calls[d.toolCall.index]) {
            r.calls[d.toolCall.index] = true;
            r.text.append(`${r.text.textContent ? '\n' : ''}${d.toolCall.name}(`);
          }
          if (d.toolCall.arguments) r.text.append(d.toolCall.arguments);
        }
        break;
      }
      case 'model.completed': {
        document.getElementById('loop-model').textContent = d.model;
        const el = row(ev, 'model', h('strong', {}, `Model turn, iteration ${d.iteration}`),
          d.text ? h('pre', { class: 'answer' }, d.text) : null,
          d.toolCalls.length ? h('ul', { class: 'calls' }, d.toolCalls.map((c) => h('li', {}, 'calls ', h('strong', {}, c.name), jsonView(c.arguments)))) : null,
          h('p', { class: 'hint' }, `${d.model}, ${d.stopReason}, ${usageText(d.usage)}, ${ms(d.durationMs)}`));
        const r = live.get(d.iteration);
        if (r) {
          r.el.replaceWith(el);
          live.delete(d.iteration);
        } else {
          timeline.append(el);
        }
        break;
      }
      case 'tool.started': {
        const s = spinner('running');
        const el = row(ev, 'tool-started', h('span', {}, 'Tool call ', h('strong', {}, d.name), ' ', s.el), jsonView(d.arguments));
        toolRows.set(d.callId, s);
        timeline.append(el);
        break;
      }
      case 'tool.completed': {
        toolRows.get(d.callId)?.stop('');
        toolRows.delete(d.callId);
        timeline.append(row(ev, 'tool-completed',
          h('span', {}, 'Tool result ', h('strong', {}, d.name), ' ', d.isError ? badge('isError', 'failed') : badge('ok', 'completed'), ` ${ms(d.durationMs)}`),
          h('pre', { class: `answer${d.isError ? ' is-error' : ''}` }, contentText(d.content)),
          d.structuredContent ? jsonView(d.structuredContent) : null,
          nested(d.structuredContent)));
        break;
      }
      case 'tool.sampling':
        // The tool's MCP server had sampled answer a sampling request of
        // its own while the call ran: nested sampling, part of this run.
        timeline.append(row(ev, 'tool-sampling',
          h('span', {}, 'Nested sampling for ', h('strong', {}, d.name), ' by its MCP server'),
          d.run ? h('p', { class: 'nested' }, 'Client-run loop: ', h('a', { href: `#/loops/${encodeURIComponent(d.run)}` }, h('code', {}, d.run))) : null,
          h('p', { class: 'hint' }, `${d.model || 'a model'}, ${usageText(d.usage)}`)));
        break;
      case 'iteration.completed':
        iterations = d.iteration;
        showProgress();
        timeline.append(row(ev, 'iteration', h('span', {}, `Iteration ${d.iteration} done`),
          h('span', { class: 'hint' }, ` ${d.toolCalls.length ? `tools called: ${d.toolCalls.join(', ')}` : 'answered in text'}, ${ms(d.durationMs)}`)));
        break;
      case 'loop.completed':
        iterations = d.totalIterations;
        showProgress();
        for (const s of toolRows.values()) s.stop('');
        for (const r of live.values()) r.el.classList.add('cut');
        timeline.append(row(ev, 'completed', h('span', {}, h('strong', {}, 'Finished '), badge(d.status)),
          d.result ? h('div', {}, h('h3', {}, 'Result'), h('pre', { class: 'answer', id: 'loop-result' }, d.result)) : null,
          d.error ? h('p', { class: 'problem-detail' }, d.error) : null,
          h('p', { class: 'hint' }, `${usageText(d.usage)}, ${ms(d.durationMs)}`)));
        setStatus(d.status);
        break;
      default:
        break;
    }
  };

  // Follow the stream; when it breaks or ends before loop.completed,
  // resume after the last event shown with Last-Event-ID, so that no
  // event shows twice.
  let lastId = 0;
  let finished = false;
  let failures = 0;
  let connections = 0;
  const setConn = (state, text) => { conn.dataset.state = state; conn.textContent = text; };
  const follow = async () => {
    while (!finished && !signal.aborted) {
      try {
        const headers = { Accept: 'text/event-stream' };
        if (lastId) headers['Last-Event-ID'] = String(lastId);
        const res = await request('GET', `${path}/events`, { headers, signal });
        connections += 1;
        conn.dataset.connections = String(connections);
        setConn('live', connections > 1 ? `Live (resumed after event ${lastId})` : 'Live');
        await readEvents(res, (ev) => {
          const n = Number(ev.id);
          if (!Number.isInteger(n) || n <= lastId) return; // shown already
          lastId = n;
          failures = 0;
          let d;
          try {
            d = JSON.parse(ev.data);
          } catch {
            return;
          }
          apply({ ...ev, id: n }, d);
          if (ev.event === 'loop.completed') finished = true;
        });
        if (!finished) throw new Error('the stream ended before the run did');
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiError && err.status < 500) {
          setConn('ended', 'Not followed');
          timeline.append(h('li', { class: 'row' }, problemView(err)));
          return;
        }
        failures += 1;
        if (failures > 6) {
          setConn('ended', `Gave up after ${failures} attempts to reconnect: ${err.message}. Reload to try again.`);
          return;
        }
        const wait = Math.min(250 * 2 ** (failures - 1), 5000);
        setConn('reconnecting', `Connection lost (${err.message}); resuming after event ${lastId} in ${ms(wait)}…`);
        await sleep(wait, signal);
      }
    }
    if (finished) setConn('ended', connections > 1 ? `Complete (resumed ${connections - 1} time${connections > 2 ? 's' : ''})` : (run.status === 'running' ? 'Complete' : 'Replayed from the run\'s log'));
  };
  follow(); // the page is shown; its events keep coming
}
