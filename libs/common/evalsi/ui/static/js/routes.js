// Every page of the UI: a hash route pattern (`:name` captures one path segment) and the page module that draws
// it, imported when the route is first visited. The first pattern that matches wins, so a literal segment
// (`/cases/reports/:id`) comes before a capture in the same place (`/cases/:id`).
export const routes = [
  { pattern: '/runs', module: './pages/runs.js', section: 'runs' },
  { pattern: '/runs/:id', module: './pages/run.js', section: 'runs' },
  { pattern: '/compare', module: './pages/compare.js', section: 'compare' },
  { pattern: '/traces', module: './pages/traces.js', section: 'traces' },
  { pattern: '/traces/:id', module: './pages/trace.js', section: 'traces' },
  { pattern: '/policies', module: './pages/policies.js', section: 'policies' },
  { pattern: '/policies/:name', module: './pages/policy.js', section: 'policies' },
  { pattern: '/cases', module: './pages/cases.js', section: 'cases' },
  { pattern: '/cases/reports/:id', module: './pages/case_report.js', section: 'cases' },
  { pattern: '/cases/:id', module: './pages/case.js', section: 'cases' },
];

export const DEFAULT_PATH = '/runs';

// "#/runs/abc?state=RUN_STATE_RUNNING" → {route, params: {id: 'abc'}, query: URLSearchParams}; route is null when
// no pattern matches.
export function resolve(hash) {
  const text = (hash || '').replace(/^#/, '') || DEFAULT_PATH;
  const [rawPath, rawQuery = ''] = splitOnce(text, '?');
  const path = rawPath.replace(/\/+$/, '') || DEFAULT_PATH;
  const query = new URLSearchParams(rawQuery);
  const segments = path.split('/').slice(1);
  for (const route of routes) {
    const params = matchSegments(route.pattern.split('/').slice(1), segments);
    if (params) return { route, params, query, path };
  }
  return { route: null, params: {}, query, path };
}

// The hash of a path with a query, leaving out empty values: href('/runs', {state: 'x', name: ''}) → '#/runs?state=x'.
export function href(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null && item !== '' && item !== false) params.append(key, String(item));
    }
  }
  const text = params.toString();
  return `#${path}${text ? `?${text}` : ''}`;
}

function splitOnce(text, separator) {
  const at = text.indexOf(separator);
  return at < 0 ? [text] : [text.slice(0, at), text.slice(at + 1)];
}

function matchSegments(pattern, segments) {
  if (pattern.length !== segments.length) return null;
  const params = {};
  for (let i = 0; i < pattern.length; i += 1) {
    if (pattern[i].startsWith(':')) {
      if (!segments[i]) return null;
      try {
        params[pattern[i].slice(1)] = decodeURIComponent(segments[i]);
      } catch {
        return null;
      }
    } else if (pattern[i] !== segments[i]) {
      return null;
    }
  }
  return params;
}
