// The run UI's live timeline: a run's events (Server-Sent Events from /api/runs/<id>/events)
// made into entries, the model's text growing as model.delta events arrive, retried attempts
// struck out. Loaded before ui.js, whose helpers (el, json, when, duration, soon, refresh) and
// state (view) it uses when called. Run data is put in the page as text only.
"use strict";

// -- the live timeline ------------------------------------------------------------------------

function follow() {
  const runId = view.runId;
  const after = view.lastOffset >= 0 ? `?after=${view.lastOffset}` : "";
  const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events${after}`);
  view.source = source;
  const live = document.getElementById("live");
  live.textContent = "following live";
  source.onmessage = (message) => {
    if (runId === view.runId) onEvent(JSON.parse(message.data));
  };
  source.addEventListener("end", () => {
    source.close();
    if (view.source === source) view.source = null;
    live.textContent = "run ended";
    refresh();
  });
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) live.textContent = "reconnecting…";
  };
}

function add(kind, head, ...body) {
  const item = el("li", { class: kind }, el("div", { class: "head" }, head), ...body);
  document.getElementById("timeline").append(item);
  return item;
}

function where(e) {
  return `turn ${e.turn}` + (e.call !== undefined && e.call !== null ? ` call ${e.call}` : "");
}

// The rule of longstep_kit.ops.live.visible: an attempt named by step.superseded, or any attempt
// of a step whose step.finished names another one, does not count: its entries are struck out.
function mark(item) {
  if (item.classList.contains("superseded")) return;
  item.classList.add("superseded");
  item.append(el("div", { class: "note" }, "retried: this attempt does not count"));
}

function strike(step, attempt) {
  view.gone.add(`${step}|${attempt}`);
  for (const item of (view.attempts.get(step) || new Map()).get(attempt) || []) mark(item);
}

function track(e, item) {
  if (!e.step || !e.attempt) return item;
  if (!view.attempts.has(e.step)) view.attempts.set(e.step, new Map());
  const byAttempt = view.attempts.get(e.step);
  if (!byAttempt.has(e.attempt)) byAttempt.set(e.attempt, []);
  byAttempt.get(e.attempt).push(item);
  item.dataset.step = e.step;
  item.dataset.attempt = e.attempt;
  const winner = view.winners.get(e.step);
  if (view.gone.has(`${e.step}|${e.attempt}`) || (winner && winner !== e.attempt)) strike(e.step, e.attempt);
  return item;
}

function stepCard(e) {
  const items = (view.attempts.get(e.step) || new Map()).get(e.attempt) || [];
  return items.find((item) => item.classList.contains("step"));
}

function modelCard(e) {
  return track(e, add("model step", `${where(e)} · model`, el("div", { class: "text" })));
}

function onEvent(e) {
  if (e.offset <= view.lastOffset) return; // a reconnect that overlapped: each event once
  view.lastOffset = e.offset;
  if (REFRESHING.has(e.type)) soon(); // where the run stands has changed
  const handler = HANDLERS[e.type];
  if (handler) handler(e);
  else add("steer", `${e.type}`, el("div", { class: "meta" }, json(Object.fromEntries(Object.entries(e).filter(([k]) => !["offset", "type", "at", "run_id", "attempt"].includes(k))))));
}

const REFRESHING = new Set(["approval.requested", "approval.decided", "wait.started", "wait.ended", "escalation.raised", "child.started", "run.paused", "run.unpaused", "run.stopped", "run.finished"]);

const HANDLERS = {
  "run.started": (e) => add("steer", "run started", el("div", { class: "meta" }, `agent ${e.agent}${e.parent ? `, child of ${e.parent}` : ""}`), el("div", { class: "note" }, e.goal)),
  "run.resumed": (e) => add("steer", `run resumed at turn ${e.next_turn}`),
  "run.continued": (e) => add("steer", `continued as a new execution (generation ${e.generation})`),
  "step.started": (e) => {
    if (e.kind === "model") return modelCard(e);
    return track(e, add("tool step", `${where(e)} · ${e.tool}`, el("pre", { class: "args" }, json(e.args))));
  },
  "model.delta": (e) => {
    const card = stepCard(e) || modelCard(e);
    card.querySelector(".text").append(e.text); // a text node: streamed text is never markup
    card.dataset.deltas = String(Number(card.dataset.deltas || 0) + 1);
  },
  "step.finished": (e) => finished(e, false),
  "step.replayed": (e) => finished(e, true),
  "step.superseded": (e) => strike(e.step, e.superseded_attempt),
  "step.failed": (e) => add("problem", `${e.task} failed: ${e.error}`, el("div", { class: "meta" }, e.message)),
  "model.corrected": (e) => add("problem", `${where(e)} · feedback to the model`, el("div", { class: "meta" }, json(e.feedback))),
  "approval.requested": (e) => {
    return add("human", `${where(e)} · approval needed: ${e.tool}`, el("div", { class: "meta" }, `request ${e.approval_id}`));
  },
  "approval.decided": (e) => {
    return add("human", `${where(e)} · ${e.tool}: ${e.decision} by ${e.approver}`, e.reason ? el("div", { class: "meta" }, e.reason) : null, e.input ? el("pre", {}, json(e.input)) : null);
  },
  "escalation.raised": (e) => add("problem", `${e.call !== undefined ? where(e) : `turn ${e.turn}`} · escalated to a human`, el("div", { class: "meta" }, json(e.error || e.message || ""))),
  "wait.started": (e) => add("wait", `${where(e)} · waiting for ${e.kind === "event" ? `event ${e.event}` : e.kind === "timer" ? `a timer until ${when(e.until)}` : e.kind}`),
  "wait.ended": (e) => add("wait", `${where(e)} · waited ${duration(e.waited_seconds)} (${e.kind})`),
  "signal.received": (e) => add("wait", `signal ${e.event || ""} received`),
  "child.started": (e) => add("steer", `${where(e)} · child run `, el("a", { href: `#/run/${encodeURIComponent(e.child_run_id)}` }, e.child_run_id), ` (${e.agent})`),
  "message.sent": (e) => add("steer", `message ${e.index} sent by ${e.by}`, el("div", { class: "text" }, e.text)),
  "message.received": (e) => add("steer", `turn ${e.turn} · the model took a message`, el("div", { class: "meta" }, e.text)),
  "pause.requested": (e) => add("steer", `pause requested by ${e.by}`),
  "run.paused": (e) => add("steer", `paused at turn ${e.turn}: nothing runs until resumed`),
  "run.unpaused": (e) => add("steer", `resumed by ${e.by}`),
  "stop.requested": (e) => add("steer", `stop requested by ${e.by}`, el("div", { class: "meta" }, e.reason)),
  "run.stopped": (e) => add("steer", `stopped at turn ${e.turn}`, el("div", { class: "meta" }, e.reason)),
  "run.finished": (e) => add("steer", `run finished: ${e.status} after ${e.turns} turns`, e.output ? el("div", { class: "text" }, json(e.output)) : null),
};

function finished(e, replayed) {
  let card = stepCard(e);
  if (!card) card = e.kind === "model" ? modelCard(e) : track(e, add("tool step", `${where(e)} · ${e.tool}`, el("pre", { class: "args" }, json(e.args))));
  if (!replayed) {
    view.winners.set(e.step, e.attempt);
    for (const attempt of (view.attempts.get(e.step) || new Map()).keys()) if (attempt !== e.attempt) strike(e.step, attempt);
  }
  if (e.kind === "model") {
    const text = card.querySelector(".text");
    if (!text.textContent && e.text) text.textContent = e.text;
    if (e.tools && e.tools.length) card.append(el("div", { class: "meta" }, `calls ${e.tools.join(", ")}`));
  } else {
    card.append(el("div", { class: "meta" }, `${e.status}${replayed ? " (replayed)" : ""}`), el("pre", { class: "result" }, json(e.result)));
  }
  card.classList.add("done");
}
