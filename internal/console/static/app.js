// The console's entry point: the pages by URL fragment, and the API key
// dialog.
import { apiKey, onKeyChange, setApiKey, setKeyPrompt } from './api.js';
import { h, clear, problemView } from './ui.js';
import { playground } from './playground.js';
import { loops } from './loops.js';
import { tools } from './tools.js';

const pages = {
  playground: { title: 'Playground', render: playground },
  loops: { title: 'Loops', render: loops },
  tools: { title: 'Tools and servers', render: tools },
};

const main = document.getElementById('main');
let current = null;

// route renders the page the URL fragment names: #/playground,
// #/loops, #/loops/<id>, #/tools.
function route(focus) {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const name = parts[0] || 'playground';
  if (current) current.abort();
  const ctl = new AbortController();
  current = ctl;
  document.body.dataset.ready = '';
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  clear(main);
  const page = pages[name];
  if (!page) {
    document.title = 'Not found · sampled console';
    main.append(h('h1', {}, 'No such page'), h('p', {}, h('a', { href: '#/playground' }, 'Go to the playground')));
    document.body.dataset.ready = 'none';
    return;
  }
  document.title = `${page.title} · sampled console`;
  Promise.resolve()
    .then(() => page.render(main, parts.slice(1), ctl.signal))
    .then(() => {
      if (!ctl.signal.aborted) document.body.dataset.ready = name;
    })
    .catch((err) => {
      if (ctl.signal.aborted) return;
      main.append(problemView(err));
      document.body.dataset.ready = `${name}-error`;
    });
  if (focus) main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', () => route(true));

// The key dialog.
const dialog = document.getElementById('key-dialog');
const form = document.getElementById('key-form');
const input = document.getElementById('key-input');
const reasonText = document.getElementById('key-reason');
const errorText = document.getElementById('key-error');
const keyButton = document.getElementById('key-button');

function showKeyState() {
  keyButton.textContent = apiKey() ? 'API key: set' : 'API key: none';
}

// askKey opens the dialog and resolves to the key typed, or null.
function askKey(reason, problem) {
  return new Promise((resolve) => {
    const ctl = new AbortController();
    const on = (el, type, fn) => el.addEventListener(type, fn, { signal: ctl.signal });
    const done = (key) => {
      ctl.abort();
      if (dialog.open) dialog.close();
      keyButton.focus();
      resolve(key);
    };
    const detail = problem && problem.detail ? ` (${problem.detail})` : '';
    switch (reason) {
      case 'refused':
        reasonText.textContent = 'The service needs an API key.';
        errorText.textContent = `The service refused this key${detail}. Check it and try again.`;
        errorText.hidden = false;
        break;
      case 'needed':
        reasonText.textContent = `The service needs an API key${detail}.`;
        errorText.hidden = true;
        break;
      default:
        reasonText.textContent = apiKey() ? 'A key is set for this tab. Type another, or forget it.' : 'No key is set for this tab.';
        errorText.hidden = true;
    }
    input.value = '';
    on(form, 'submit', (e) => {
      e.preventDefault();
      const key = input.value.trim();
      if (!key) {
        errorText.textContent = 'Type a key first.';
        errorText.hidden = false;
        input.focus();
        return;
      }
      setApiKey(key);
      done(key);
    });
    on(document.getElementById('key-forget'), 'click', () => { setApiKey(''); done(null); });
    on(document.getElementById('key-cancel'), 'click', () => done(null));
    on(dialog, 'cancel', (e) => { e.preventDefault(); done(null); });
    dialog.showModal();
    input.focus();
  });
}

setKeyPrompt(askKey);
onKeyChange(showKeyState);
keyButton.addEventListener('click', async () => {
  const before = apiKey();
  await askKey('change');
  if (apiKey() !== before) route(false); // what the page shows depends on the key
});
showKeyState();

route(false);
