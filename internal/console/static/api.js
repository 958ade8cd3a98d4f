// The console's client of sampled's HTTP API: JSON requests, problem
// documents as errors, the API key kept for the tab, and event streams
// read with fetch (so that they can carry the key and Last-Event-ID).

const keyItem = 'sampled.apiKey';

// ApiError is a failed answer: its status and its problem document.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export function apiKey() {
  return sessionStorage.getItem(keyItem) || '';
}

export function setApiKey(key) {
  if (key) {
    sessionStorage.setItem(keyItem, key);
  } else {
    sessionStorage.removeItem(keyItem);
  }
  for (const fn of keyListeners) fn(key);
}

const keyListeners = [];

// onKeyChange calls fn with the new key each time it changes.
export function onKeyChange(fn) {
  keyListeners.push(fn);
}

let askKey = async () => null;
let pendingAsk = null;

// setKeyPrompt installs the function that asks the visitor for a key:
// it is given why ('needed' or 'refused') and the 401 problem, and
// resolves to the key typed, or null when the visitor gave up.
export function setKeyPrompt(fn) {
  askKey = fn;
}

// promptKey asks for a key once for every request that needs one at the
// same time.
function promptKey(reason, problem) {
  if (!pendingAsk) {
    pendingAsk = askKey(reason, problem).finally(() => { pendingAsk = null; });
  }
  return pendingAsk;
}

async function readProblem(res) {
  const text = await res.text().catch(() => '');
  try {
    const p = JSON.parse(text);
    if (p && typeof p === 'object') return p;
  } catch {
    // not a problem document; described below
  }
  return { title: res.statusText || 'Error', status: res.status, detail: text.slice(0, 500) };
}

// request sends one request to the API and returns the Response of a 2xx
// answer; any other answer is thrown as an ApiError. A 401 asks for a key
// and tries again with it.
export async function request(method, path, opts = {}) {
  for (;;) {
    const headers = new Headers(opts.headers || {});
    const key = apiKey();
    if (key) headers.set('Authorization', `Bearer ${key}`);
    let body;
    if (opts.body !== undefined) {
      headers.set('Content-Type', 'application/json');
      body = JSON.stringify(opts.body);
    }
    const res = await fetch(path, { method, headers, body, signal: opts.signal, cache: 'no-store' });
    if (res.status === 401 && !opts.noPrompt) {
      const problem = await readProblem(res);
      const typed = await promptKey(key ? 'refused' : 'needed', problem);
      if (typed == null) throw new ApiError(401, problem);
      continue;
    }
    if (!res.ok) throw new ApiError(res.status, await readProblem(res));
    return res;
  }
}

// getJSON and sendJSON answer the parsed body of a JSON answer.
export async function getJSON(path, opts = {}) {
  const res = await request('GET', path, opts);
  return res.json();
}

export async function sendJSON(method, path, body, opts = {}) {
  const res = await request(method, path, { ...opts, body });
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

// readEvents reads a text/event-stream body and calls onEvent with each
// message as {event, data, id} (data joined across its data: lines, id
// null when the message has none). It resolves when the body ends and
// rejects when the connection breaks.
export async function readEvents(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let msg = { event: '', data: [], id: null };
  const line = (l) => {
    if (l === '') {
      if (msg.data.length > 0) {
        onEvent({ event: msg.event || 'message', data: msg.data.join('\n'), id: msg.id });
      }
      msg = { event: '', data: [], id: null };
      return;
    }
    if (l.startsWith(':')) return; // a comment: the heartbeat
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event': msg.event = value; break;
      case 'data': msg.data.push(value); break;
      case 'id': msg.id = value; break;
      default: break; // retry and unknown fields are not used
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let l = buf.slice(0, nl);
      if (l.endsWith('\r')) l = l.slice(0, -1);
      buf = buf.slice(nl + 1);
      line(l);
    }
  }
}
