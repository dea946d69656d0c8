// Boot: theme, sign-in, project picker, and the hash router that draws one page module at a time into <main>.

import { api, ApiError, getProject, getToken, setProject, setToken } from './api.js';
import { clearBanner, h, loading, showBanner } from './dom.js';
import { resolve } from './routes.js';

const THEME_KEY = 'evalsi.theme';
const APP_NAME = 'Evals.si';

// --- theme ---

function systemTheme() {
  return window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

function currentTheme() {
  return document.documentElement.dataset.theme || systemTheme();
}

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
  const button = document.getElementById('theme-toggle');
  const dark = currentTheme() === 'dark';
  button.setAttribute('aria-pressed', String(dark));
  button.textContent = dark ? 'Light theme' : 'Dark theme';
}

function setupTheme() {
  applyTheme(localStorage.getItem(THEME_KEY));
  document.getElementById('theme-toggle').addEventListener('click', () => {
    const next = currentTheme() === 'dark' ? 'light' : 'dark';
    localStorage.setItem(THEME_KEY, next);
    applyTheme(next);
  });
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    applyTheme(localStorage.getItem(THEME_KEY));
  });
}

// --- sign-in and project ---

function showSignedIn() {
  document.getElementById('signin-button').textContent = getToken() ? 'Signed in' : 'Sign in';
}

function setupSignIn() {
  const dialog = document.getElementById('signin-dialog');
  const input = document.getElementById('signin-token');
  document.getElementById('signin-button').addEventListener('click', () => {
    input.value = '';
    dialog.showModal();
    input.focus();
  });
  document.getElementById('signin-form').addEventListener('submit', () => {
    const token = input.value.trim();
    if (token) setToken(token);
    input.value = '';
    showSignedIn();
    navigate();
  });
  document.getElementById('signout-button').addEventListener('click', () => {
    setToken('');
    dialog.close();
    showSignedIn();
    navigate();
  });
  document.getElementById('signin-cancel').addEventListener('click', () => dialog.close());
  showSignedIn();
}

function setupProject() {
  const input = document.getElementById('project-input');
  input.value = getProject();
  document.getElementById('project-form').addEventListener('submit', (event) => {
    event.preventDefault();
    setProject(input.value.trim());
    input.value = getProject();
    navigate();
  });
}

// --- router ---

let pages = null; // the page modules the server holds (pages.json), so a missing one is never fetched
let current = { path: null, cleanup: null, controller: null };

async function knownPages() {
  if (pages === null) {
    const response = await fetch('pages.json', { headers: { Accept: 'application/json' } });
    pages = new Set(response.ok ? await response.json() : []);
  }
  return pages;
}

function setTitle(text) {
  document.title = text ? `${text} \u00b7 ${APP_NAME}` : APP_NAME;
}

function markSection(section) {
  for (const link of document.querySelectorAll('.nav-links a')) {
    if (link.dataset.section === section) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function freshMain() {
  // A new element each time: a page still drawing after the viewer left writes into a detached node. It is
  // aria-busy until the page has drawn, then marked data-ready (what the UI tests wait for).
  const old = document.getElementById('main');
  const main = h('main', { id: 'main', tabindex: '-1', 'aria-busy': 'true' });
  old.replaceWith(main);
  return main;
}

function drawn(root) {
  root.removeAttribute('aria-busy');
  root.dataset.ready = 'true';
}

function message(root, title, text, link) {
  setTitle(title);
  root.replaceChildren(h('h1', {}, title), h('p', {}, text), link || null);
}

export function reportError(err) {
  if (!err || err.name === 'AbortError') return;
  const text = err instanceof ApiError ? `${err.message}${err.status ? ` (HTTP ${err.status})` : ''}` : String(err.message || err);
  showBanner(text);
}

async function navigate() {
  const { route, params, query, path } = resolve(window.location.hash);
  const samePath = current.path === path;
  const focusedId = samePath ? document.activeElement?.id : null;
  if (current.controller) current.controller.abort();
  if (typeof current.cleanup === 'function') current.cleanup();
  const controller = new AbortController();
  current = { path, cleanup: null, controller };
  clearBanner();
  // A link may name its project (`#/runs/RUN?project=quickstart`, as the all-projects runs list makes them): the
  // picker switches to it, so the page and the links it draws read in that project. The address then drops it,
  // or choosing another project in the picker would land back in this one.
  const linked = query.get('project');
  if (linked) {
    setProject(linked);
    document.getElementById('project-input').value = getProject();
    query.delete('project');
    const rest = query.toString();
    window.history.replaceState(null, '', `#${path}${rest ? `?${rest}` : ''}`);
  }
  const root = freshMain();
  markSection(route?.section);
  if (!route) {
    message(root, 'Page not found', `Nothing lives at #${path}.`, h('p', {}, h('a', { href: '#/runs' }, 'Go to the runs')));
    drawn(root);
    return;
  }
  const file = route.module.replace('./pages/', '');
  if (!(await knownPages()).has(file)) {
    message(root, 'Not built yet', `The page for #${route.pattern} (${file}) is not built yet in this version.`);
    drawn(root);
    return;
  }
  loading(root);
  try {
    const page = await import(route.module);
    if (controller.signal.aborted) return;
    root.replaceChildren();
    const ctx = { api, setTitle, signal: controller.signal, showError: reportError, navigate: go };
    const cleanup = await page.render(root, params, query, ctx);
    if (controller.signal.aborted) {
      if (typeof cleanup === 'function') cleanup();
      return;
    }
    current.cleanup = cleanup;
  } catch (err) {
    if (controller.signal.aborted) return;
    root.replaceChildren(h('h1', {}, 'This page could not be shown'));
    reportError(err);
  }
  drawn(root);
  const again = focusedId && document.getElementById(focusedId);
  if (again) again.focus();
  else if (!samePath) root.focus({ preventScroll: true });
}

// Go to a hash (a string such as '#/runs?state=...'); the same hash draws the page again.
export function go(hash) {
  if (window.location.hash === hash) navigate();
  else window.location.hash = hash;
}

function boot() {
  setupTheme();
  setupSignIn();
  setupProject();
  document.getElementById('banner-close').addEventListener('click', clearBanner);
  document.getElementById('skip-link').addEventListener('click', (event) => {
    event.preventDefault();
    document.getElementById('main').focus();
  });
  window.addEventListener('unhandledrejection', (event) => {
    reportError(event.reason);
    if (event.reason instanceof ApiError || event.reason?.name === 'AbortError') event.preventDefault();
  });
  window.addEventListener('hashchange', navigate);
  if (!window.location.hash) window.history.replaceState(null, '', '#/runs');
  navigate();
}

boot();
