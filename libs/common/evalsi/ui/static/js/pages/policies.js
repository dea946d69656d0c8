// #/policies: the project's online policies (ListPolicies, every page), each linking to its statistics.

import { fmtDuration, fmtTime, h, table } from '../dom.js';

// A project holds few policies; this bounds the pages read should one hold many.
const MAX_PAGES = 20;

export function stageNames(spec) {
  return (spec?.cascade || []).map((stage) => stage.alias || stage.ref);
}

const COLUMNS = [
  {
    key: 'name', label: 'Policy',
    render: (p) => h('a', { href: `#/policies/${encodeURIComponent(p.name)}` }, p.name),
  },
  { key: 'selector', label: 'Selector', value: (p) => p.policy?.spec?.selector || 'every trace' },
  { key: 'rate', label: 'Sampling', numeric: true, value: (p) => Number(p.policy?.spec?.sampling?.rate ?? 0) },
  { key: 'cascade', label: 'Cascade', value: (p) => stageNames(p.policy?.spec).join(' \u2192 ') },
  { key: 'window', label: 'Window', value: (p) => fmtDuration(p.policy?.spec?.window || '300s') },
  { key: 'alerts', label: 'Alert rules', numeric: true, value: (p) => (p.policy?.spec?.alerts || []).length,
    render: (p) => String((p.policy?.spec?.alerts || []).length) },
  { key: 'promote', label: 'Promotes into', value: (p) => p.policy?.spec?.promote?.dataset || '' },
  { key: 'generation', label: 'Generation', numeric: true, value: (p) => Number(p.generation || 0),
    render: (p) => String(Number(p.generation || 0)) },
  { key: 'updateTime', label: 'Updated', render: (p) => fmtTime(p.updateTime) },
];

export async function render(root, params, query, ctx) {
  ctx.setTitle('Policies');
  root.append(h('h1', {}, 'Online policies'));
  const policies = [];
  let token = '';
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const answer = await ctx.api.get('/v1alpha1/policies', { pageSize: 500, pageToken: token }, ctx.signal);
    policies.push(...(answer.policies || []));
    token = answer.nextPageToken || '';
    if (!token) break;
  }
  root.append(
    h('p', { class: 'muted' }, 'Policies choose live traces and evaluate them with a cascade of evaluators; '
      + 'open one for its window statistics, alerts and promotions.'),
    table(COLUMNS, policies, {
      caption: 'Policies of this project',
      emptyText: 'No policy in this project: apply one with `evalsi policies apply -f policy.yaml`.',
      rowLabel: (p) => `policy ${p.name}`,
      onRowClick: (p) => ctx.navigate(`#/policies/${encodeURIComponent(p.name)}`),
    }));
  if (token) root.append(h('p', { class: 'muted' }, `Showing the first ${policies.length} policies.`));
}
