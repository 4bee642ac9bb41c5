// tickwork console: the live parts. Everything else works without this script.
// - [data-watch] on a job's output: server-sent events (WatchJob) update state and output.
// - [data-watch-job] on the overview: the running job's last output line.
// - [data-cron-input]: the description and next fire times follow the expression (DescribeCron).
// Text from the server is always set with textContent, never as HTML.
"use strict";

function lastLine(text) {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  return lines.length ? lines[lines.length - 1] : "";
}

function watch(url, onJob, onEnd) {
  const source = new EventSource(url);
  source.addEventListener("job", (e) => onJob(JSON.parse(e.data)));
  const stop = () => { source.close(); if (onEnd) onEnd(); };
  source.addEventListener("end", stop);
  source.addEventListener("failure", stop);
  return source;
}

function watchJobPage(output) {
  const status = document.querySelector("[data-job-status]");
  const errorBox = document.querySelector("[data-job-error-box]");
  const error = document.querySelector("[data-job-error]");
  const start = document.querySelector("[data-job-start]");
  const finish = document.querySelector("[data-job-finish]");
  const note = document.querySelector("[data-live-note]");
  watch(output.dataset.watch, (job) => {
    output.textContent = job.output;
    if (status) {
      const pill = document.createElement("span");
      pill.className = "pill pill-" + job.status.toLowerCase();
      pill.textContent = job.status.toLowerCase();
      status.replaceChildren(pill);
    }
    if (error && errorBox) { error.textContent = job.error; errorBox.hidden = !job.error; }
    if (start) start.textContent = job.start;
    if (finish) finish.textContent = job.finish;
    const actions = document.querySelector("[data-live-actions]");
    // Cancel and Abort fit a queued or running job only: once it has ended they go.
    if (actions && job.status !== "QUEUED" && job.status !== "RUNNING") actions.hidden = true;
  }, () => { if (note) note.textContent = "The job has ended."; });
}

function watchLiveLines() {
  document.querySelectorAll("[data-watch-job]").forEach((line) => {
    watch("/jobs/" + line.dataset.watchJob + "/events", (job) => {
      line.textContent = lastLine(job.output);
    });
  });
}

function tickElapsed() {
  const cells = document.querySelectorAll("[data-elapsed-since]");
  if (!cells.length) return;
  const show = (s) => s < 60 ? s + " s" : s < 3600 ? Math.floor(s / 60) + " min " + (s % 60) + " s"
    : Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  setInterval(() => {
    cells.forEach((cell) => {
      const since = Date.parse(cell.dataset.elapsedSince);
      if (!isNaN(since)) cell.textContent = show(Math.max(0, Math.round((Date.now() - since) / 1000)));
    });
  }, 1000);
}

function cronPreview() {
  const cron = document.querySelector("[data-cron-input]");
  const zone = document.querySelector("[data-zone-input]");
  const box = document.querySelector("[data-cron-preview]");
  if (!cron || !zone || !box) return;
  let timer = null;
  let asked = 0;
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  };
  const show = async () => {
    const expression = cron.value.trim();
    const ask = ++asked;
    if (!expression) { box.replaceChildren(el("p", "Empty: the interval below is used.", "hint")); return; }
    const query = new URLSearchParams({ expression, timezone: zone.value.trim() || "UTC" });
    let answer, ok;
    try {
      const response = await fetch("/cron/describe?" + query, { credentials: "same-origin" });
      ok = response.ok;
      answer = await response.json();
    } catch (e) {
      ok = false; answer = { error: "the console could not be reached" };
    }
    if (ask !== asked) return; // a later keystroke has asked again
    if (!ok) {
      box.replaceChildren(el("p", answer.error, "error"));
      box.firstChild.setAttribute("data-cron-error", "");
      return;
    }
    const table = el("table");
    const head = el("tr");
    ["In the zone", "UTC", "DST note"].forEach((h) => head.append(el("th", h)));
    table.append(el("thead"));
    table.firstChild.append(head);
    const body = el("tbody");
    answer.fire_times.forEach((f) => {
      const row = el("tr");
      const local = el("td", f.local);
      local.title = f.iso;
      row.append(local, el("td", f.utc), el("td", f.dst_note));
      body.append(row);
    });
    table.append(body);
    const description = el("p", answer.description, "description");
    description.setAttribute("data-cron-description", "");
    const wrap = el("div", undefined, "scroll");
    wrap.append(table);
    box.replaceChildren(description, wrap);
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(show, 250); };
  cron.addEventListener("input", later);
  zone.addEventListener("input", later);
  if (cron.value.trim()) show();
}

document.addEventListener("DOMContentLoaded", () => {
  const output = document.querySelector("[data-watch]");
  if (output) watchJobPage(output);
  watchLiveLines();
  tickElapsed();
  cronPreview();
});
