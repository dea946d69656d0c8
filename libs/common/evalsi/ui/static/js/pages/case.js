// #/cases/:id: one stored case (GetCase): its YAML exactly as imported, where it came from, and why it no longer
// loads when it does not. The tenant is the hash's `tenant` (default platform).

import { fmtTime, h } from '../dom.js';
import { href } from '../routes.js';
import { statusBadge, tenantOf, tenantQuery } from './cases_format.js';

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
  root.append(
    h('p', {}, h('a', { href: href('/cases', tenantQuery(tenant)) }, '\u2190 All cases')),
    h('h1', {}, 'Case ', h('code', {}, stored.id), ' ', stored.problem ? statusBadge('broken') : null),
    stored.problem ? h('p', { class: 'bad', id: 'case-problem', role: 'note' }, stored.problem) : null,
    facts(stored),
    h('h2', { id: 'case-yaml-heading' }, 'Definition'),
    h('p', { class: 'muted' }, 'As imported, comments included; `evalsi cases show ID` prints the same text.'),
    h('pre', { id: 'case-yaml', tabindex: '0', 'aria-labelledby': 'case-yaml-heading' }, stored.yaml));
}
