// A run's per-record results, read from ListRunResults one evaluator at a time: the API orders results by
// (evaluator, record, trial), so the same page size over each evaluator covers the same records, and a page of
// every evaluator makes a page of the record table (one row per record and trial, a column per metric).

import { scoreFor, scoreNumber } from './run_format.js';

export const RESULTS_PAGE = 200; // results per evaluator and page (the API's limit is 500)

// The aliases of a run's evaluators: the manifest's once it ended, else its summaries' and its spec's.
export function evaluatorAliases(run) {
  const aliases = new Set();
  for (const evaluator of run.manifest?.evaluators || []) if (evaluator.alias) aliases.add(evaluator.alias);
  for (const summary of run.summaries || []) if (summary.evaluator) aliases.add(summary.evaluator);
  for (const ref of run.spec?.evaluators || []) {
    aliases.add(ref.alias || ref.ref.replace(/@.*$/, '').split('/').pop());
  }
  return [...aliases];
}

export class RunResults {
  constructor(api, runId, evaluators, signal) {
    this.api = api;
    this.runId = runId;
    this.signal = signal;
    this.cursors = new Map(evaluators.map((alias) => [alias, '']));
    this.done = new Set();
    this.rows = new Map(); // "record\u0000trial" → {recordId, trial, results: {alias: result}}
  }

  get complete() {
    return this.done.size === this.cursors.size;
  }

  // The next page of every evaluator not yet exhausted; resolves to the number of results read.
  async loadMore() {
    let read = 0;
    const path = `/v1alpha1/runs/${encodeURIComponent(this.runId)}/results`;
    await Promise.all([...this.cursors.entries()].filter(([alias]) => !this.done.has(alias)).map(async ([alias, token]) => {
      const answer = await this.api.get(path, { evaluator: alias, page_size: RESULTS_PAGE, page_token: token }, this.signal);
      for (const result of answer.results || []) this.add(result);
      read += (answer.results || []).length;
      if (answer.nextPageToken) this.cursors.set(alias, answer.nextPageToken);
      else this.done.add(alias);
    }));
    return read;
  }

  add(result) {
    const trial = result.trial || 0;
    const key = `${result.recordId}\u0000${trial}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { recordId: result.recordId, trial, results: {} };
      this.rows.set(key, row);
    }
    row.results[result.evaluator] = result;
  }

  records() {
    return [...this.rows.values()];
  }

  // Every loaded value of `metric` (summary.evaluator is its evaluator's alias), as numbers; labels counted apart.
  values(summary) {
    const numbers = [];
    const labels = new Map();
    for (const row of this.rows.values()) {
      const result = row.results[summary.evaluator];
      if (!result || result.outcome !== 'OUTCOME_SCORED') continue;
      const score = scoreFor(result, summary.metric);
      const number = scoreNumber(score);
      if (number !== null) numbers.push(number);
      else if (score && typeof score.label === 'string') labels.set(score.label, (labels.get(score.label) || 0) + 1);
    }
    return { numbers, labels };
  }
}
