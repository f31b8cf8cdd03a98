// The run UI's page: the runs list (#/) and a run's view (#/run/<id>); its timeline is timeline.js.
// Every piece of run data is put in the page as text (textContent, text nodes): never as HTML.
// A run's events come from /api/runs/<id>/events (Server-Sent Events): the browser reconnects
// with Last-Event-ID after a drop, and the server sends exactly the events after it.
"use strict";

const STATUSES = ["running", "paused", "waiting_for_approval", "waiting_for_event", "escalated", "succeeded", "stopped", "failed", "timed_out", "aborted"]; // longstep.run_status.STATUSES (a test holds them equal)
const view = { timer: null, source: null, runId: null, lastOffset: -1, attempts: new Map(), winners: new Map(), gone: new Set() };

// -- small helpers ----------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") Object.assign(node.style, value); // CSSOM, which the CSP allows (a style attribute it would not)
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child)); // a string becomes a text node
  }
  return node;
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function duration(seconds) {
  const s = Math.round(Number(seconds) || 0);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function when(epoch) {
  return epoch ? new Date(Number(epoch) * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
}

async function api(method, path, body) {
  const options = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(data.error || `${response.status}`);
  return data;
}

function say(text, isError) {
  const notice = document.getElementById("notice");
  if (!notice) return;
  notice.className = isError ? "error" : "notice";
  notice.textContent = text;
}

function stopTimers() {
  if (view.timer) clearInterval(view.timer);
  clearTimeout(view.soon);
  if (view.source) view.source.close();
  view.timer = view.source = null;
  document.getElementById("live").textContent = "";
}

// -- the runs list ----------------------------------------------------------------------------

function field(id, label, input) {
  return el("div", {}, el("label", { for: id }, label), input);
}

function showRuns() {
  stopTimers();
  const app = document.getElementById("app");
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = el("select", { id: "f-status" }, el("option", { value: "" }, "any"), ...STATUSES.map((s) => el("option", { value: s }, s)));
  const form = el(
    "form",
    { class: "filters", id: "filters", role: "search" },
    field("f-q", "Search", el("input", { type: "search", id: "f-q", placeholder: "run id, agent or goal" })),
    field("f-agent", "Agent", el("input", { type: "text", id: "f-agent" })),
    field("f-status", "Status", status),
    field("f-age", "Started within", el("input", { type: "text", id: "f-age", placeholder: "e.g. 2h, 3d" })),
    field("f-parent", "Parent", el("input", { type: "text", id: "f-parent", placeholder: "a run id, or none" })),
  );
  const names = { q: "f-q", agent: "f-agent", status: "f-status", age: "f-age", parent: "f-parent" };
  app.replaceChildren(el("h1", {}, "Runs"), form, el("p", { id: "notice", role: "status" }), el("div", { id: "runs" }));
  for (const [name, id] of Object.entries(names)) document.getElementById(id).value = query.get(name) || "";
  const load = async () => {
    const params = new URLSearchParams();
    for (const [name, id] of Object.entries(names)) if (document.getElementById(id).value) params.set(name, document.getElementById(id).value);
    try {
      const data = await api("GET", `/api/runs?${params}`);
      renderRuns(data.runs);
      say("");
    } catch (error) {
      say(error.message, true);
    }
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); load(); });
  form.addEventListener("change", load);
  form.addEventListener("input", () => { clearTimeout(form.pending); form.pending = setTimeout(load, 300); });
  load();
  view.timer = setInterval(load, 5000);
}

function renderRuns(runs) {
  const rows = runs.map((run) =>
    el(
      "tr",
      { "data-run-id": run.run_id },
      el("td", {}, el("a", { href: `#/run/${encodeURIComponent(run.run_id)}`, style: { paddingLeft: `${run.depth * 1.2}rem` } }, run.run_id)),
      el("td", {}, el("span", { class: `status ${run.status}` }, run.status)),
      el("td", {}, run.agent),
      el("td", { class: "wide" }, when(run.started)),
      el("td", { class: "goal" }, run.detail || run.goal),
    ),
  );
  const head = el("tr", {}, el("th", {}, "Run"), el("th", {}, "Status"), el("th", {}, "Agent"), el("th", { class: "wide" }, "Started"), el("th", {}, "Detail"));
  document.getElementById("runs").replaceChildren(rows.length ? el("table", { id: "runs-table" }, el("thead", {}, head), el("tbody", {}, ...rows)) : el("p", {}, "No runs match."));
}

// -- one run ----------------------------------------------------------------------------------

function showRun(runId) {
  stopTimers();
  Object.assign(view, { runId, lastOffset: -1, attempts: new Map(), winners: new Map(), gone: new Set() });
  const app = document.getElementById("app");
  const message = el("textarea", { id: "message", placeholder: "the model reads it at its next turn" });
  const reason = el("input", { type: "text", id: "stop-reason", placeholder: "why (recorded with the stop)" });
  app.replaceChildren(
    el("p", {}, el("a", { href: "#/", id: "back" }, "← all runs")),
    el("h1", { id: "run-id" }, runId),
    el("p", {}, el("span", { id: "run-status", class: "status" }, "…"), " ", el("span", { id: "run-detail", class: "meta" })),
    el("p", { id: "run-goal", class: "note" }),
    el("p", { id: "notice", role: "status" }),
    el(
      "div",
      { class: "controls" },
      el("form", { id: "send-form", class: "panel" }, el("label", { for: "message" }, "Message to the agent"), message, el("button", { id: "send", class: "primary" }, "Send")),
      el(
        "div",
        { class: "panel" },
        el("button", { id: "pause", type: "button", onclick: () => steer("pause") }, "Pause"),
        el("button", { id: "resume", type: "button", onclick: () => steer("resume") }, "Resume"),
        el("label", { for: "stop-reason" }, "Stop reason"),
        reason,
        el("button", { id: "stop", type: "button", class: "danger", onclick: () => steer("stop", { reason: reason.value }) }, "Stop"),
      ),
    ),
    el("section", { id: "approvals-section", hidden: true }, el("h2", {}, "Waiting for your decision"), el("div", { id: "approvals" })),
    el("section", { id: "children-section", hidden: true }, el("h2", {}, "Child runs"), el("ul", { id: "children", class: "children" })),
    el("section", {}, el("h2", {}, "Timeline"), el("ol", { id: "timeline", class: "timeline" })),
    el("section", {}, el("h2", {}, "Cost"), el("button", { id: "cost-button", type: "button", onclick: showCost }, "Estimate the cost"), el("div", { id: "cost" })),
  );
  document.getElementById("send-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (await steer("send", { text: message.value })) message.value = "";
  });
  refresh();
  follow();
  view.timer = setInterval(refresh, 5000);
}

async function steer(action, body) {
  try {
    const answer = await api("POST", `/api/runs/${encodeURIComponent(view.runId)}/${action}`, body || {});
    const told = {
      send: () => `message ${answer.message} queued for the next model turn`,
      pause: () => (answer.changed ? "pauses at its next model turn" : "was paused already"),
      resume: () => (answer.resumed === "unpaused" ? "resumed where it paused" : "resumed in a new execution"),
      stop: () => `stops at its next step boundary (${answer.stopping.length} run${answer.stopping.length === 1 ? "" : "s"})`,
    };
    say(`${view.runId}: ${told[action]()}`);
    await refresh();
    if (action === "resume" && !view.source) follow();
    return true;
  } catch (error) {
    say(error.message, true);
    return false;
  }
}

// Several events in a row (a stream read from its start) ask for one refresh, not one each.
function soon() {
  clearTimeout(view.soon);
  view.soon = setTimeout(refresh, 250);
}

async function refresh() {
  const runId = view.runId;
  try {
    const run = await api("GET", `/api/runs/${encodeURIComponent(runId)}`);
    if (runId !== view.runId) return;
    const status = document.getElementById("run-status");
    status.textContent = run.status + (run.pause_requested && !run.paused && run.running ? " (pause requested)" : "");
    status.className = `status ${run.status}`;
    document.getElementById("run-detail").textContent = run.detail || "";
    document.getElementById("run-goal").textContent = run.agent ? `${run.agent}: ${run.goal}` : run.goal;
    document.getElementById("pause").disabled = !run.running || run.pause_requested;
    document.getElementById("resume").disabled = run.running && !run.pause_requested;
    document.getElementById("stop").disabled = !run.running;
    document.getElementById("send").disabled = !run.running;
    const kids = run.children.map((c) =>
      el("li", {}, el("a", { href: `#/run/${encodeURIComponent(c.run_id)}`, style: { marginLeft: `${(c.depth - 1) * 1.2}rem` } }, c.run_id), ` ${c.agent}, turn ${c.turn} call ${c.call}: `, el("span", { class: `status ${c.status}` }, c.status)),
    );
    document.getElementById("children").replaceChildren(...kids);
    document.getElementById("children-section").hidden = !kids.length;
    await refreshApprovals();
  } catch (error) {
    say(error.message, true);
  }
}

async function refreshApprovals() {
  const runId = view.runId;
  const data = await api("GET", `/api/runs/${encodeURIComponent(runId)}/approvals`);
  if (runId !== view.runId) return;
  // Cards still pending are kept as they are (a reason being typed is not wiped by a refresh).
  const box = document.getElementById("approvals");
  const kept = new Map([...box.children].map((card) => [card.dataset.approvalId, card]));
  box.replaceChildren(...data.approvals.map((a) => kept.get(a.approval_id) || approvalCard(a)));
  document.getElementById("approvals-section").hidden = !data.approvals.length;
}

function approvalCard(a) {
  const reason = el("input", { type: "text", class: "reason", "aria-label": `reason for ${a.tool}`, placeholder: "reason (needed to reject)" });
  const decide = async (decision) => {
    try {
      await api("POST", `/api/approvals/${encodeURIComponent(a.approval_id)}/decision`, { decision, reason: reason.value || undefined });
      say(`${a.tool} (turn ${a.turn} call ${a.call}): ${decision === "approve" ? "approved" : "rejected"}`);
    } catch (error) {
      say(error.message, true);
    }
    refreshApprovals().catch(() => {});
  };
  return el(
    "div",
    { class: "approval", "data-approval-id": a.approval_id },
    el("div", { class: "head" }, `${a.tool}, turn ${a.turn} call ${a.call}`),
    el("div", { class: "meta" }, `asked ${a.requested_at}, expires ${a.expires_at}`),
    el("pre", { class: "args" }, json(a.input)),
    reason,
    el("button", { type: "button", class: "primary approve", onclick: () => decide("approve") }, "Approve"),
    el("button", { type: "button", class: "danger reject", onclick: () => decide("reject") }, "Reject"),
  );
}

async function showCost() {
  try {
    const data = await api("GET", `/api/runs/${encodeURIComponent(view.runId)}/cost`);
    const rows = data.cost.lines.map((line) => el("tr", {}, el("td", {}, line.item), el("td", {}, `$${Number(line.dollars).toFixed(6)}`)));
    rows.push(el("tr", {}, el("th", {}, "total"), el("th", {}, `$${Number(data.cost.total).toFixed(6)}`)));
    document.getElementById("cost").replaceChildren(el("table", { id: "cost-table" }, el("tbody", {}, ...rows)));
  } catch (error) {
    say(error.message, true);
  }
}

// -- routing ----------------------------------------------------------------------------------

function route() {
  const match = location.hash.match(/^#\/run\/([^?]+)/);
  if (match) showRun(decodeURIComponent(match[1]));
  else showRuns();
}

window.addEventListener("hashchange", route);
route();
