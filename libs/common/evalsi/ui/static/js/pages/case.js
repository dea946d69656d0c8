// #/cases/:id: one stored case (GetCase): its YAML exactly as imported, where it came from, why it no longer loads
// when it does not, and its outcome in the latest reports of its agent. The tenant is the hash's `tenant` (default
// platform).

import { append, fmtTime, h } from '../dom.js';
import { href } from '../routes.js';
import { reportHref, statusBadge, tenantOf, tenantQuery } from './cases_format.js';

// Reports read for "In recent reports": each is a whole document, so a few.
const RECENT_REPORTS = 5;

function facts(stored) {
  const rows = [
    ['Agent', h('a', { href: href('/cases', { ...tenantQuery(stored.tenant), agent: stored.agent }) }, stored.agent)],
    ['Tenant', stored.tenant],
    ['Project', stored.project],
    ['File', h('code', {}, `${stored.path}:${stored.line || 1}`)],
    ['Document in its file', String(Number(stored.position || 0) + 1)],
    ['Content hash (SHA-256)', h('code', {}, stored.yamlHash)],
    ['Imported', fmtTime(stored.createTime)],
    ['Last changed', fmtTime(stored.updateTime)],
  ];
  return h('dl', { class: 'kv' }, rows.flatMap(([label, value]) => [h('dt', {}, label), h('dd', {}, value)]));
}

export async function render(root, params, query, ctx) {
  const tenant = tenantOf(query);
  ctx.setTitle(`Case ${params.id}`);
  const stored = await ctx.api.get(`/v1alpha1/cases/${encodeURIComponent(params.id)}`, { tenant }, ctx.signal);
  // dom.js append: a child left out (null) is skipped, where Element.append would write "null".
  append(root, [
    h('p', {}, h('a', { href: href('/cases', tenantQuery(tenant)) }, '\u2190 All cases')),
    h('h1', {}, 'Case ', h('code', {}, stored.id), ' ', stored.problem ? statusBadge('broken') : null),
    stored.problem ? h('p', { class: 'bad', id: 'case-problem', role: 'note' }, stored.problem) : null,
    facts(stored),
    h('h2', { id: 'case-yaml-heading' }, 'Definition'),
    h('p', { class: 'muted' }, 'As imported, comments included; `evalsi cases show ID` prints the same text.'),
    h('pre', { id: 'case-yaml', tabindex: '0', 'aria-labelledby': 'case-yaml-heading' }, stored.yaml)]);
  root.append(await recentOutcomes(stored, ctx));
}

async function recentOutcomes(stored, ctx) {
  const listed = await ctx.api.get('/v1alpha1/case-reports',
    { tenant: stored.tenant, agent: stored.agent, pageSize: RECENT_REPORTS }, ctx.signal);
  const rows = [];
  for (const summary of listed.reports || []) {
    const report = await ctx.api.get(`/v1alpha1/case-reports/${encodeURIComponent(summary.id)}`,
      { tenant: stored.tenant }, ctx.signal);
    for (const result of (report.report?.cases || []).filter((c) => c.id === stored.id)) {
      rows.push(h('tr', {},
        h('th', { scope: 'row' }, h('a', {
          href: reportHref(summary.id, stored.tenant, { case: stored.id, trial: result.trial || '' }),
        }, summary.name || summary.id)),
        h('td', {}, fmtTime(summary.uploadTime)),
        h('td', { class: 'num' }, result.trial ? String(result.trial) : '\u2014'),
        h('td', {}, statusBadge(result.status)),
        h('td', {}, result.reason || '\u2014')));
    }
  }
  return h('section', { 'aria-labelledby': 'case-recent-heading' },
    h('h2', { id: 'case-recent-heading' }, 'In recent reports'),
    rows.length ? h('table', { id: 'case-recent' },
      h('caption', {}, `This case in the latest ${RECENT_REPORTS} reports of agent ${stored.agent}`),
      h('thead', {}, h('tr', {}, ['Report', 'Uploaded', 'Trial', 'Outcome', 'Reason'].map((label) => h('th', { scope: 'col' }, label)))),
      h('tbody', {}, rows))
      : h('p', { class: 'empty' }, `Not in the latest ${RECENT_REPORTS} reports of agent ${stored.agent}.`));
}
