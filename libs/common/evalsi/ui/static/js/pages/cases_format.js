// What the cases pages share: case outcomes as badges, a report's counts and pass rate, and the tenant a page
// reads (the hash's `tenant`, else platform: CaseService answers another tenant's case or report as missing).

import { fmtInterval, h } from '../dom.js';
import { href } from '../routes.js';

export const DEFAULT_TENANT = 'platform';
// docs/cases.md, "Outcomes": the order reports count them in.
export const OUTCOMES = ['pass', 'fail', 'judge_pending', 'skipped', 'broken', 'error'];
const OUTCOME_CLASS = {
  pass: 'good', fail: 'bad', error: 'bad', broken: 'bad', judge_pending: 'state-pending', skipped: '',
};
// CaseCounts in the protobuf JSON mapping: lowerCamel names, and a zero count left out.
const COUNT_FIELD = { judge_pending: 'judgePending' };

export function tenantOf(query) {
  return (query.get('tenant') || '').trim() || DEFAULT_TENANT;
}

// The hash query a link keeps for the tenant: nothing for the default, so links stay short.
export function tenantQuery(tenant) {
  return tenant === DEFAULT_TENANT ? {} : { tenant };
}

export function outcomeLabel(status) {
  return String(status || '').replace('_', ' ');
}

export function statusBadge(status) {
  return h('span', { class: `badge ${OUTCOME_CLASS[status] ?? ''}`.trim(), dataset: { status } }, outcomeLabel(status));
}

export function countOf(counts, status) {
  return Number(counts?.[COUNT_FIELD[status] || status] || 0);
}

// "1 pass · 1 fail · 1 skipped" for a CaseReport's counts.
export function countsView(counts) {
  const parts = OUTCOMES.filter((status) => countOf(counts, status))
    .map((status) => h('span', { class: 'count', dataset: { status } }, `${countOf(counts, status)} `, statusBadge(status)));
  if (!parts.length) return 'no case';
  return h('span', { class: 'counts' }, parts.flatMap((part, i) => (i ? [' ', part] : [part])));
}

// "0.500 [0.095, 0.905]" over pass + fail; a dash when no case passed or failed.
export function passRateText(report) {
  if (report.passRate === undefined || report.passRate === null) return 'n/a (no case passed or failed)';
  return fmtInterval(report.passRate, report.ciLow, report.ciHigh);
}

export function reportHref(reportId, tenant, extra) {
  return href(`/cases/reports/${encodeURIComponent(reportId)}`, { ...tenantQuery(tenant), ...(extra || {}) });
}

export function caseHref(caseId, tenant) {
  return href(`/cases/${encodeURIComponent(caseId)}`, tenantQuery(tenant));
}
