// The public HTTP/JSON API (docs/api.md), called with the viewer's own credential and project.
//
// The credential is an API key or bearer token the viewer pasted into the sign-in form, kept in sessionStorage
// (this tab only) and sent as `Authorization: Bearer`; with none, nothing is sent (auth off). The project is the
// picker's, sent as `x-evalsi-project`. Every failure becomes an ApiError {status, code, message}: the API's own
// google.rpc.Status when it answered one, else the HTTP status and a sentence saying what went wrong.

const TOKEN_KEY = 'evalsi.token';
const PROJECT_KEY = 'evalsi.project';
export const DEFAULT_PROJECT = 'default';
// A stream line longer than this is refused rather than buffered without end.
const MAX_LINE_CHARS = 16 * 1024 * 1024;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function getProject() {
  return localStorage.getItem(PROJECT_KEY) || DEFAULT_PROJECT;
}

export function setProject(project) {
  if (project && project !== DEFAULT_PROJECT) localStorage.setItem(PROJECT_KEY, project);
  else localStorage.removeItem(PROJECT_KEY);
}

// `withProject` false leaves out the project header: a call that names no project (ListRuns' allProjects, which
// the API refuses beside a named project).
function headers(extra, withProject = true) {
  const out = { Accept: 'application/json', ...(withProject ? { 'x-evalsi-project': getProject() } : {}), ...extra };
  const token = getToken();
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

// `params`: an object of query parameters; an array value repeats its key (labels=a&labels=b); empty values
// (undefined, null, '', an empty array) are left out so a blank filter means "any".
export function url(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null && item !== '') query.append(key, String(item));
    }
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

async function failure(response) {
  let code = '';
  let message = `${response.status} ${response.statusText}`.trim();
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    const status = body.error || body;
    if (status && typeof status.message === 'string') {
      message = status.message;
      code = status.code ?? '';
    }
  } catch {
    if (text) message = `${message}: ${text.slice(0, 300)}`;
  }
  if (response.status === 401) message = `${message} (sign in with an API key: the Sign in button above)`;
  return new ApiError(response.status, code, message);
}

async function send(method, path, params, body, signal, withProject = true) {
  let response;
  try {
    response = await fetch(url(path, params), {
      method,
      headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }, withProject),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'same-origin',
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'UNAVAILABLE', `cannot reach the Evals.si API (${method} ${path}): ${err.message}`);
  }
  if (!response.ok) throw await failure(response);
  return response.json();
}

function parseLine(line) {
  const message = JSON.parse(line);
  if (message.error) {
    throw new ApiError(200, message.error.code ?? '', message.error.message || 'the stream ended with an error');
  }
  return message;
}

export const api = {
  // `{project: false}`: without the project header (see headers above).
  get(path, params, signal, { project = true } = {}) {
    return send('GET', path, params, undefined, signal, project);
  },
  post(path, body, signal) {
    return send('POST', path, undefined, body ?? {}, signal);
  },
  // A server-streaming RPC's HTTP form: newline-delimited JSON, one message a line, an error after the first
  // message arriving as a last line {"error": {...}}. Resolves when the stream ends; rejects with an ApiError,
  // or an AbortError when `signal` aborts it (the page went away).
  async stream(path, onMessage, signal) {
    let response;
    try {
      response = await fetch(path, { headers: headers({ Accept: 'application/x-ndjson' }), signal });
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      throw new ApiError(0, 'UNAVAILABLE', `cannot reach the Evals.si API (GET ${path}): ${err.message}`);
    }
    if (!response.ok) throw await failure(response);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += value;
      let newline;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line) onMessage(parseLine(line));
      }
      if (buffered.length > MAX_LINE_CHARS) {
        await reader.cancel();
        throw new ApiError(0, 'RESOURCE_EXHAUSTED', `a line of ${path} is longer than ${MAX_LINE_CHARS} characters`);
      }
    }
    if (buffered.trim()) onMessage(parseLine(buffered.trim()));
  },
};
