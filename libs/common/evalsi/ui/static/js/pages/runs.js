// #/runs: the runs of the project, newest first, filtered by state, name, labels and creation date (ListRuns applies
// every one, so each page the API's token leads to holds only matching runs). Every filter and the page live in
// the hash query, so a filtered list is a link.

import { getProject } from '../api.js';
import { fmtDuration, fmtTime, h, secondsBetween, table } from '../dom.js';
import { href } from '../routes.js';
import { labelsText, RUN_STATES, enumText, stateBadge, summaryText } from './run_format.js';

const PAGE_SIZE = 25;
const MAX_LABEL_FILTERS = 20;

export function labelFilters(text) {
  return (text || '').split(/[,\s]+/).map((item) => item.trim()).filter(Boolean).slice(0, MAX_LABEL_FILTERS);
}

// A date input's "2026-12-01" as the RFC 3339 start of that day (UTC), `days` later. "Created to" takes in its whole
// day, so ListRuns gets the next midnight as createdBefore (exclusive). Text that is no date (a hand-edited link)
// goes as it is, for the API to refuse with a message naming the parameter.
function dayStart(date, days) {
  if (!date) return '';
  const moment = new Date(`${date}T00:00:00Z`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(moment.getTime())) return date;
  moment.setUTCDate(moment.getUTCDate() + days);
  return moment.toISOString().replace('.000Z', 'Z');
}

function datesText(from, to) {
  if (from && to) return `, created ${from} to ${to} (UTC)`;
  if (from) return `, created from ${from} (UTC)`;
  return to ? `, created to ${to} (UTC)` : '';
}

function gatesText(run) {
  const gates = run.gates || [];
  if (!gates.length) return '';
  const passed = gates.filter((gate) => gate.passed).length;
  return `${passed}/${gates.length} passed`;
}

function progressText(run) {
  const progress = run.progress || {};
  return `${Number(progress.completed || 0)}/${Number(progress.totalTasks || 0)}`;
}

export async function render(root, params, query, ctx) {
  ctx.setTitle('Runs');
  const filters = {
    state: query.get('state') || '',
    name: query.get('name') || '',
    labels: query.get('labels') || '',
    from: query.get('from') || '',
    to: query.get('to') || '',
    all: query.get('all') === '1',
    after: query.get('after') || '',
  };
  // "Compare with another run" on a run's page comes here with that run chosen (compare=<id>).
  const compareWith = query.get('compare') || '';
  const field = (id, label, input) => h('label', { for: id }, label, input);
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter runs' },
    field('runs-state', 'State', h('select', { id: 'runs-state', name: 'state' },
      h('option', { value: '' }, 'any'),
      RUN_STATES.map((state) => h('option', { value: state, selected: state === filters.state },
        enumText(state, 'RUN_STATE_'))))),
    field('runs-name', 'Name contains', h('input', { id: 'runs-name', name: 'name', type: 'search', value: filters.name,
      maxlength: 200 })),
    field('runs-labels', 'Labels (key=value, …)', h('input', { id: 'runs-labels', name: 'labels', type: 'text',
      value: filters.labels, maxlength: 1000, placeholder: 'team=search' })),
    field('runs-from', 'Created from', h('input', { id: 'runs-from', name: 'from', type: 'date', value: filters.from })),
    field('runs-to', 'Created to', h('input', { id: 'runs-to', name: 'to', type: 'date', value: filters.to })),
    h('label', { class: 'check', for: 'runs-all' },
      h('input', { id: 'runs-all', name: 'all', type: 'checkbox', checked: filters.all }), 'All projects'),
    h('button', { type: 'submit', id: 'runs-apply' }, 'Apply filters'),
    h('a', { href: '#/runs', class: 'button secondary' }, 'Clear'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    ctx.navigate(href('/runs', {
      state: data.get('state'), name: data.get('name').trim(), labels: labelFilters(data.get('labels')).join(','),
      from: data.get('from'), to: data.get('to'), all: data.get('all') ? '1' : '', compare: compareWith,
    }));
  });

  const selected = new Set(compareWith ? [compareWith] : []);
  const compareButton = h('button', { type: 'button', id: 'compare-selected', disabled: true }, 'Compare the two selected');
  const selectNote = h('span', { class: 'muted', 'aria-live': 'polite' },
    compareWith ? `Comparing with ${compareWith}: select one more run.` : 'Select two runs to compare them.');
  compareButton.addEventListener('click', () => {
    const [a, b] = [...selected];
    ctx.navigate(href('/compare', { a, b }));
  });
  function toggle(run, checked) {
    if (checked) selected.add(run.id);
    else selected.delete(run.id);
    compareButton.disabled = selected.size !== 2;
    selectNote.textContent = selected.size === 2 ? 'Ready to compare.' : `${selected.size} selected; select two.`;
  }

  root.append(h('h1', {}, 'Runs'), form);
  if (filters.from && filters.to && filters.to < filters.from) {
    root.append(h('p', { class: 'bad', role: 'alert', id: 'runs-dates-wrong' },
      `"Created to" (${filters.to}) is before "Created from" (${filters.from}): no run can match. Change one of them.`));
    return;
  }
  let answer;
  try {
    answer = await ctx.api.get('/v1alpha1/runs', {
      state: filters.state, name_contains: filters.name, labels: labelFilters(filters.labels),
      created_after: dayStart(filters.from, 0), created_before: dayStart(filters.to, 1),
      page_size: PAGE_SIZE, page_token: filters.after, all_projects: filters.all ? 'true' : '',
    }, ctx.signal, { project: !filters.all });
  } catch (err) {
    // A filter the API refuses (a hand-edited date, another project's page token): its message in the banner, and
    // the form stays to correct it.
    if (err.name !== 'AbortError') ctx.showError(err);
    return;
  }
  const runs = answer.runs || [];
  const filtered = Boolean(filters.state || filters.name || filters.labels || filters.from || filters.to);
  // Across projects a run's link names its project: its page reads in that one (the picker follows).
  const runHref = (run) => (filters.all ? href(`/runs/${encodeURIComponent(run.id)}`, { project: run.project })
    : `#/runs/${encodeURIComponent(run.id)}`);
  let emptyText = `No runs in project ${getProject()}. A run in another project (the quickstart's is in `
    + '"quickstart") shows when you choose that project in the Project box above, or tick All projects.';
  if (filtered) emptyText = 'No runs match these filters.';
  else if (filters.all) emptyText = 'No runs in any project yet. Start one with `evalsi run -f run.yaml --server URL`.';

  const columns = [
    { key: 'name', label: 'Name', value: (run) => run.name || run.id,
      render: (run) => h('a', { href: runHref(run) }, run.name || run.id) },
    { key: 'state', label: 'State', value: (run) => enumText(run.state, 'RUN_STATE_'), render: (run) => stateBadge(run.state) },
    { key: 'project', label: 'Project' },
    { key: 'labels', label: 'Labels', value: (run) => labelsText(run.labels) },
    { key: 'created', label: 'Created', value: (run) => run.createTime || '', render: (run) => fmtTime(run.createTime) },
    { key: 'duration', label: 'Duration', numeric: true,
      value: (run) => secondsBetween(run.startTime, run.endTime),
      render: (run) => (run.startTime ? fmtDuration(secondsBetween(run.startTime, run.endTime)) : '\u2014') },
    { key: 'progress', label: 'Tasks', numeric: true, value: progressText },
    { key: 'metric', label: 'First metric', value: (run) => {
      const first = (run.summaries || [])[0];
      return first ? `${first.metric} ${summaryText(first)}` : '';
    } },
    { key: 'gates', label: 'Gates', value: gatesText },
    { key: 'select', label: 'Compare', sortable: false, render: (run) => h('input', {
      type: 'checkbox', 'aria-label': `Select ${run.name || run.id} to compare`, checked: selected.has(run.id),
      onChange: (event) => toggle(run, event.target.checked) }) },
  ];
  root.append(
    h('div', { class: 'pager' }, compareButton, selectNote),
    table(columns, runs, {
      caption: `Runs of ${filters.all ? 'every project' : `project ${getProject()}`}${datesText(filters.from, filters.to)}`,
      emptyText,
      onRowClick: (run) => ctx.navigate(runHref(run)),
      rowLabel: (run) => `Run ${run.name || run.id}, ${enumText(run.state, 'RUN_STATE_')}`,
      filterLabel: 'Filter this page',
    }),
    h('nav', { class: 'pager', 'aria-label': 'Pages of runs' },
      filters.after ? h('a', { href: href('/runs', { ...filters, after: '', all: filters.all ? '1' : '' }), class: 'button secondary' }, 'First page') : null,
      answer.nextPageToken
        ? h('a', { href: href('/runs', { ...filters, after: answer.nextPageToken, all: filters.all ? '1' : '' }), class: 'button', id: 'runs-next' }, 'Next page')
        : h('span', { class: 'muted' }, 'Last page.')));
}
