// The halfmq dashboard: polls the admin API every 2 s, keeps 5 minutes of counter readings
// in memory for the rate charts. No external assets: works offline.
"use strict";

const HISTORY_SECONDS = 300;
const readings = [];  // {time, totals}
const $ = (id) => document.getElementById(id);

// A broker with an auth token answers 401: the page asks for the token once and keeps it, in
// memory only, for as long as it is open.
let token = null;
class TokenNeeded extends Error {}

async function get(path) {
  const headers = { Accept: "application/json" };
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, { headers });
  if (response.status === 401) throw new TokenNeeded(token === null ? "this broker needs its auth token" : "the token was refused");
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token = $("token").value;
  $("token-form").hidden = true;
  refresh();
});

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 60) return `${value.toFixed(1)} s`;
  if (value < 3600) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

function bytes(value) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (value >= 1000 && i < units.length - 1) { value /= 1000; i++; }
  return `${i ? value.toFixed(1) : value} ${units[i]}`;
}

function retention(topic) {
  if (topic.retention_seconds === null) return "broker's";
  return topic.retention_seconds === 0 ? "forever" : seconds(topic.retention_seconds);
}

function delayed(topic) {
  if (!topic.delayed) return "none";
  return `${topic.delayed}, next in ${seconds(Math.max(0, (topic.next_due - Date.now()) / 1000))}`;
}

function checksDelivered(totals) {
  return totals.checks_delivered || 0;
}

function drawChart(canvas, points) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const max = Math.max(1, ...points.map((p) => p.rate));
  ctx.strokeStyle = "#232b35";
  ctx.beginPath(); ctx.moveTo(0, height - 0.5); ctx.lineTo(width, height - 0.5); ctx.stroke();
  ctx.fillStyle = "#8a94a3"; ctx.font = "11px system-ui";
  ctx.fillText(`${max.toFixed(1)}/s`, 4, 12);
  if (points.length < 2) return;
  const now = points[points.length - 1].time;
  // The window grows with the history kept, from 30 s up to 5 minutes.
  const span = Math.min(HISTORY_SECONDS, Math.max(30, now - points[0].time));
  ctx.fillText(`last ${Math.round(span)} s`, width - 70, 12);
  ctx.strokeStyle = "#4fb3ff"; ctx.lineWidth = 2; ctx.beginPath();
  points.forEach((p, i) => {
    const x = width - ((now - p.time) / span) * width;
    const y = height - 4 - (p.rate / max) * (height - 20);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  canvas.dataset.points = String(points.length);
  canvas.dataset.last = points[points.length - 1].rate.toFixed(3);
}

function rates(key) {
  const points = [];
  for (let i = 1; i < readings.length; i++) {
    const [a, b] = [readings[i - 1], readings[i]];
    const value = (r) => (key === "checks" ? checksDelivered(r.totals) : r.totals[key] || 0);
    const dt = b.time - a.time;
    if (dt > 0) points.push({ time: b.time, rate: Math.max(0, (value(b) - value(a)) / dt) });
  }
  return points;
}

async function refresh() {
  try {
    const [health, stats, pending, topics, consumers, kafka, retries, groups, clients] = await Promise.all([
      get("/healthz"), get("/stats"), get("/transactions?state=PENDING&limit=50"), get("/topics"), get("/consumers"),
      get("/transactional-ids?limit=50"), get("/consumers/retries"), get("/kafka-groups"), get("/clients"),
    ]);
    $("health").textContent = health.status; $("health").className = "pill ok";
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    $("pending").textContent = stats.pending_half_messages;
    for (const key of ["committed", "rolled_back", "discarded"]) $(key).textContent = stats.totals[key] || 0;
    $("checks").textContent = checksDelivered(stats.totals);
    $("sessions").textContent = health.producer_sessions;
    $("store-bytes").textContent = bytes(stats.store_bytes);
    $("store-bytes").title = `${bytes(stats.store_used_bytes)} in use`;

    const now = stats.time / 1000;  // the API's times are epoch milliseconds
    readings.push({ time: now, totals: stats.totals });
    while (readings.length && readings[0].time < now - HISTORY_SECONDS) readings.shift();
    for (const key of ["committed", "rolled_back", "discarded", "checks"]) drawChart($(`chart-${key}`), rates(key));

    $("pending-total").textContent = `(${pending.total})`;
    $("pending-rows").innerHTML = pending.items.length ? pending.items.map((t) => `<tr class="pending-row">
        <td><code>${escape(t.transaction_id)}</code></td><td>${escape(t.producer_group)}</td><td>${escape(t.topic)}</td>
        <td>${seconds(t.age_seconds)}</td><td>${t.check_times}</td>
        <td>${t.next_check_at === null ? "–" : `in ${seconds((t.next_check_at - stats.time) / 1000)}`}</td>
        <td>${t.orphaned ? `<span class="orphaned">orphaned: no producer online; discarded in ${seconds((t.discard_at - stats.time) / 1000)}</span>` : ""}</td></tr>`).join("")
      : '<tr><td colspan="7" class="muted">none</td></tr>';

    $("kafka-total").textContent = `(${kafka.total})`;
    $("kafka-rows").innerHTML = kafka.items.length ? kafka.items.map((k) => `<tr class="kafka-row">
        <td><code>${escape(k.transactional_id)}</code></td><td>${k.epoch}</td><td>${k.txn_number}</td>
        <td>${k.state}${k.aborted_by ? ` (${k.aborted_by.toLowerCase()})` : ""}</td>
        <td>${k.age_seconds === null ? "–" : seconds(k.age_seconds)}</td><td>${k.messages}</td><td>${k.offsets}</td>
        <td>${k.committed}</td><td>${k.aborted}</td></tr>`).join("")
      : '<tr><td colspan="9" class="muted">none</td></tr>';

    const members = groups.flatMap((g) => (g.members.length ? g.members : [null]).map((m) => `<tr class="kafka-group-row">` +
      `<td>${escape(g.name)}</td><td>${escape(g.state)}</td><td>${g.generation}</td>` +
      (m ? `<td><code>${escape(m.member_id)}</code></td><td>${escape(m.client_host)}</td><td>${escape(m.assigned.join(" "))}</td>`
        : '<td class="muted" colspan="3">no live member</td>') + "</tr>"));
    $("kafka-group-rows").innerHTML = members.length ? members.join("") : '<tr><td colspan="6" class="muted">none</td></tr>';

    $("client-rows").innerHTML = clients.length ? clients.map((c) => `<tr class="client-row">` +
      `<td>${escape(c.protocol)}</td><td>${escape(c.group)}</td><td>${escape(c.role)}</td>` +
      `<td><code>${escape(c.client_id)}</code></td><td>${escape(c.address)}</td></tr>`).join("")
      : '<tr><td colspan="5" class="muted">none</td></tr>';

    const chosen = $("message-topic").value;
    $("message-topic").innerHTML = '<option value="">any</option>' + topics.items.map((t) =>
      `<option${t.name === chosen ? " selected" : ""}>${escape(t.name)}</option>`).join("");
    const queueLists = await Promise.all(topics.items.map((t) => get(`/topics/${encodeURIComponent(t.name)}/queues`)));
    $("topic-rows").innerHTML = topics.items.flatMap((t, i) => queueLists[i].map((q) =>
      `<tr><td>${escape(t.name)}</td><td>${escape(t.message_type || "any")}</td><td>${retention(t)}</td>` +
      `<td>${delayed(t)}</td><td>${q.queue_id}</td><td>${q.min_offset}</td><td>${q.max_offset}</td></tr>`)).join("");
    $("consumer-rows").innerHTML = consumers.items.length ? consumers.items.map((c) =>
      `<tr><td>${escape(c.group)}</td><td>${escape(c.topic)}</td><td>${c.queue_id}</td><td>${c.offset}</td><td>${c.lag}</td></tr>`).join("")
      : '<tr><td colspan="5" class="muted">none</td></tr>';
    $("retry-rows").innerHTML = retries.length ? retries.map((r) => `<tr class="retry-row">` +
      `<td>${escape(r.group)}</td><td>${r.retrying}</td><td>${r.dead_letters}</td></tr>`).join("")
      : '<tr><td colspan="3" class="muted">none</td></tr>';
  } catch (error) {
    if (error instanceof TokenNeeded) {
      $("health").textContent = "token needed"; $("health").className = "pill bad";
      $("updated").textContent = error.message;
      $("token-form").hidden = false;
      return;
    }
    $("health").textContent = "unreachable"; $("health").className = "pill bad";
    $("updated").textContent = String(error);
  }
}

// The message browser: a topic's newest messages, a search by key or id, and a message's trace.
// It reads only when asked, so the refresh above never overwrites what it shows.
async function found(path) {
  try { return await get(path); } catch (error) { if (String(error).includes("HTTP 404")) return []; throw error; }
}

function messageRow(m) {
  return `<tr class="message-row" data-id="${escape(m.message_id)}"><td>${escape(m.state)}</td><td>${escape(m.topic)}</td>` +
    `<td>${m.queue_id}</td><td>${m.queue_offset < 0 ? "–" : m.queue_offset}</td><td><code>${escape(m.message_id)}</code></td>` +
    `<td>${escape(m.keys.join(" "))}</td><td>${escape(m.tags)}</td><td>${new Date(m.stored_at).toLocaleString()}</td>` +
    `<td>${escape(m.body.slice(0, 60))}</td></tr>`;
}

let search = 0;  // the newest search: an older one's answer, arriving late, is dropped

async function findMessages(event) {
  event.preventDefault();
  const topic = $("message-topic").value, query = $("message-query").value.trim(), mine = ++search;
  $("message-status").textContent = "searching…";
  try {
    let messages;
    if (query) {
      const scope = topic ? `&topic=${encodeURIComponent(topic)}` : "";
      const [byKey, byId] = await Promise.all([
        found(`/messages?key=${encodeURIComponent(query)}${scope}&limit=100`), found(`/messages/${encodeURIComponent(query)}`),
      ]);
      messages = [...byId, ...byKey];
    } else if (topic) {
      messages = await get(`/topics/${encodeURIComponent(topic)}/messages?limit=50`);
    } else {
      $("message-status").textContent = "name a topic, a key or a message id";
      return;
    }
    if (mine !== search) return;
    $("message-status").textContent = `${messages.length} found`;
    $("message-rows").innerHTML = messages.length ? messages.map(messageRow).join("") : '<tr><td colspan="9" class="muted">none</td></tr>';
  } catch (error) {
    if (mine === search) $("message-status").textContent = String(error);
  }
}

async function showTrace(messageId) {
  const trace = await get(`/messages/${encodeURIComponent(messageId)}/trace`);
  $("trace").hidden = false;
  $("trace-id").textContent = trace.message_id;
  const txn = trace.transaction;
  $("trace-transaction").textContent = txn ? `transaction of ${txn.producer_group}: ${txn.state}, ${txn.check_times} check(s)` : "";
  $("trace-rows").innerHTML = trace.groups.length ? trace.groups.map((g) => `<tr class="trace-row"><td>${escape(g.group)}</td>` +
    `<td>${escape(g.state)}</td><td>${g.attempts}</td>` +
    `<td>${escape(g.copies.map((c) => `${c.topic}/${c.queue_offset}`).join(" "))}</td></tr>`).join("")
    : '<tr><td colspan="4" class="muted">no consumer group has read its queue</td></tr>';
}

$("message-form").addEventListener("submit", findMessages);
$("message-rows").addEventListener("click", (event) => {
  const row = event.target.closest("tr.message-row");
  if (row) showTrace(row.dataset.id).catch((error) => { $("message-status").textContent = String(error); });
});

refresh();
setInterval(() => { if ($("token-form").hidden) refresh(); }, 2000);
