// Tools and servers: the MCP servers with their state (/readyz, and
// /v1/tools for why one is down) and the tools loops can use, with their
// input schemas.
import { getJSON, ApiError } from './api.js';
import { h, clear, jsonView, badge } from './ui.js';

export async function tools(main, _args, signal) {
  let ready;
  let notReady = null;
  try {
    ready = await getJSON('/readyz', { signal });
  } catch (err) {
    // 503: not ready; its problem lists the servers too.
    if (!(err instanceof ApiError) || err.status !== 503) throw err;
    notReady = err.problem;
    ready = { status: 'not ready', mcpServers: err.problem.mcpServers || [] };
  }
  const list = await getJSON('/v1/tools', { signal });
  const why = new Map(list.servers.map((s) => [s.name, s.error]));

  const state = notReady ? badge('not ready', 'failed') : (ready.degraded ? badge('degraded', 'max_iterations') : badge('ready', 'completed'));
  const servers = h('section', { class: 'panel', 'aria-labelledby': 'tl-servers' },
    h('h2', { id: 'tl-servers' }, 'MCP servers'),
    h('p', { id: 'tl-ready' }, 'Service: ', state, notReady ? ` ${notReady.detail || ''}` : '',
      ready.degraded ? ` Not connected: ${ready.degraded.join(', ')}.` : ''),
    h('div', { class: 'scroll' }, h('table', { class: 'servers', id: 'tl-server-table' },
      h('thead', {}, h('tr', {}, ['Server', 'Transport', 'State', 'Required', 'Tools', 'Why down'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, ready.mcpServers.map((s) => h('tr', { 'data-server': s.name },
        h('td', {}, h('strong', {}, s.name)),
        h('td', {}, s.transport),
        h('td', {}, s.connected ? badge('connected', 'completed') : badge('down', 'failed')),
        h('td', {}, s.required ? 'yes' : 'no'),
        h('td', {}, String(s.tools)),
        h('td', {}, why.get(s.name) || '')))))));

  const byServer = new Map();
  for (const t of list.tools) {
    if (!byServer.has(t.server)) byServer.set(t.server, []);
    byServer.get(t.server).push(t);
  }
  const toolsEl = h('section', { class: 'panel', 'aria-labelledby': 'tl-tools' },
    h('h2', { id: 'tl-tools' }, 'Tools'),
    h('p', { class: 'hint' }, 'The names loops call, and allowedTools patterns match. Open a tool for its input schema.'),
    [...byServer].map(([server, ts]) => h('div', { class: 'tool-group' },
      h('h3', {}, server),
      h('ul', { class: 'tool-list' }, ts.map((t) => h('li', { 'data-tool': t.name },
        h('details', {},
          h('summary', {}, h('code', {}, t.name), t.description ? ` ${t.description}` : ''),
          h('p', { class: 'hint' }, `${t.original} on ${t.server}`),
          jsonView(t.inputSchema, { depth: 4 }))))))));

  clear(main, h('h1', {}, 'Tools and servers'), servers, toolsEl);
}
