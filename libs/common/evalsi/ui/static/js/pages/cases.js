// #/cases: a tenant's case reports, newest first (ListCaseReports), and the cases the server stores (ListCases).
// The tenant and the agent filter live in the hash (`tenant`, `agent`), and so do the reports' page tokens
// (`page`, with the pages passed in `back`), so a filtered list is a link.

import { fmtTime, h, table } from '../dom.js';
import { href } from '../routes.js';
import {
  DEFAULT_TENANT, caseHref, countOf, countsView, passRateText, reportHref, statusBadge, tenantOf, tenantQuery,
} from './cases_format.js';

const REPORTS_PAGE = 25;
// A tenant's corpus is some hundreds of cases at most; this bounds the pages read should it hold more.
const MAX_CASE_PAGES = 10;

function filterForm(tenant, agent, ctx) {
  const form = h('form', { class: 'filters', 'aria-label': 'Case filters' },
    h('label', { for: 'cases-tenant' }, 'Tenant',
      h('input', { id: 'cases-tenant', name: 'tenant', value: tenant, maxlength: 128, autocomplete: 'off' })),
    h('label', { for: 'cases-agent' }, 'Agent',
      h('input', { id: 'cases-agent', name: 'agent', value: agent, maxlength: 128, placeholder: 'any agent',
        autocomplete: 'off' })),
    h('button', { type: 'submit', id: 'cases-apply' }, 'Show'),
    h('a', { href: '#/cases', class: 'button secondary' }, 'Clear'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const chosen = String(data.get('tenant') || '').trim() || DEFAULT_TENANT;
    ctx.navigate(href('/cases', { ...tenantQuery(chosen), agent: String(data.get('agent') || '').trim() }));
  });
  return form;
}

function reportColumns(tenant) {
  return [
    {
      key: 'uploadTime', label: 'Uploaded', value: (r) => r.uploadTime || '',
      render: (r) => h('a', { href: reportHref(r.id, tenant) }, fmtTime(r.uploadTime)),
    },
    { key: 'name', label: 'Name', value: (r) => r.name || '' },
    { key: 'agents', label: 'Agents', value: (r) => (r.agents || []).join(', ') },
    {
      key: 'counts', label: 'Outcomes', value: (r) => countOf(r.counts, 'fail'), render: (r) => countsView(r.counts),
    },
    {
      key: 'passRate', label: 'Pass rate [95% CI]', numeric: true, value: (r) => r.passRate ?? null,
      render: (r) => passRateText(r),
    },
    {
      key: 'regressions', label: 'Regressions', numeric: true, value: (r) => r.regressions ?? null,
      render: (r) => {
        if (r.regressions === undefined) return h('span', { class: 'muted' }, 'no baseline');
        return r.regressions ? h('span', { class: 'badge bad' }, String(r.regressions)) : '0';
      },
    },
    { key: 'uploadedBy', label: 'By', value: (r) => r.uploadedBy || '' },
  ];
}

function caseColumns(tenant) {
  return [
    { key: 'id', label: 'Case', render: (c) => h('a', { href: caseHref(c.id, tenant) }, c.id) },
    { key: 'agent', label: 'Agent' },
    { key: 'where', label: 'File', value: (c) => `${c.path}:${c.line || 1}` },
    {
      key: 'problem', label: 'Loads', value: (c) => (c.problem ? 'broken' : 'ok'),
      render: (c) => (c.problem ? statusBadge('broken') : h('span', { class: 'badge good' }, 'ok')),
    },
    { key: 'updateTime', label: 'Updated', render: (c) => fmtTime(c.updateTime) },
  ];
}

async function storedCases(ctx, tenant, agent) {
  const cases = [];
  let token = '';
  for (let page = 0; page < MAX_CASE_PAGES; page += 1) {
    const answer = await ctx.api.get('/v1alpha1/cases', { tenant, agent, pageSize: 500, pageToken: token },
      ctx.signal);
    cases.push(...(answer.cases || []));
    token = answer.nextPageToken || '';
    if (!token) break;
  }
  return { cases, more: Boolean(token) };
}

export async function render(root, params, query, ctx) {
  ctx.setTitle('Cases');
  const tenant = tenantOf(query);
  const agent = (query.get('agent') || '').trim();
  const page = query.get('page') || '';
  const back = (query.get('back') || '').split(',').filter(Boolean);
  root.append(h('h1', {}, 'Agent cases'),
    h('p', { class: 'muted' }, 'Reports uploaded by `evalsi cases run --server` and the cases this server stores '
      + '(`evalsi cases import`), for one tenant: another tenant\u2019s are not shown.'),
    filterForm(tenant, agent, ctx));
  const status = h('p', { class: 'loading', role: 'status' }, 'Loading reports and cases\u2026');
  root.append(status);
  const [reports, stored] = await Promise.all([
    ctx.api.get('/v1alpha1/case-reports', { tenant, agent, pageSize: REPORTS_PAGE, pageToken: page }, ctx.signal),
    storedCases(ctx, tenant, agent),
  ]);
  status.remove();

  const keep = { ...tenantQuery(tenant), agent };
  const reportList = reports.reports || [];
  root.append(h('section', { 'aria-labelledby': 'cases-reports-heading' },
    h('h2', { id: 'cases-reports-heading' }, 'Reports'),
    table(reportColumns(tenant), reportList, {
      caption: `Case reports of tenant ${tenant}, newest first`,
      filterLabel: 'Filter these reports',
      emptyText: 'No report uploaded: run `evalsi cases run --server URL` (docs/cases.md).',
      rowLabel: (r) => `report ${r.name || r.id}`,
      onRowClick: (r) => ctx.navigate(reportHref(r.id, tenant)),
    }),
    pager(page, back, reports.nextPageToken, keep)));

  root.append(h('section', { 'aria-labelledby': 'cases-stored-heading' },
    h('h2', { id: 'cases-stored-heading' }, 'Stored cases'),
    table(caseColumns(tenant), stored.cases, {
      caption: `Cases of tenant ${tenant} in corpus order`,
      filterLabel: 'Filter these cases',
      emptyText: 'No case stored for this tenant: `evalsi cases import --source DIR` stores a corpus.',
      rowLabel: (c) => `case ${c.id}`,
      onRowClick: (c) => ctx.navigate(caseHref(c.id, tenant)),
    }),
    stored.more ? h('p', { class: 'muted' }, `Showing the first ${stored.cases.length} cases.`) : null));
}

function pager(page, back, next, keep) {
  const nav = h('nav', { class: 'pager', 'aria-label': 'Pages of reports' });
  if (page) {
    const previous = back.length ? back[back.length - 1] : '-';
    nav.append(h('a', {
      id: 'cases-previous',
      href: href('/cases', { ...keep, page: previous === '-' ? '' : previous, back: back.slice(0, -1).join(',') }),
    }, 'Previous page'), h('a', { href: href('/cases', keep) }, 'First page'));
  }
  if (next) {
    // '-' stands for the first page (whose token is empty) in the trail of pages passed.
    nav.append(h('a', { id: 'cases-next', href: href('/cases', { ...keep, page: next, back: [...back, page || '-'].join(',') }) },
      'Next page'));
  }
  return nav.childElementCount ? nav : null;
}
