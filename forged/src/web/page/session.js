// One session: its transcript (the history, then its events live from
// the next seq, resumed from the last one shown after a dropped link), a
// compose box (send, steer while a turn runs, cancel), its pending
// approval, and undo of the last turn after its plan is shown.
import { call, subscribe, unsubscribe, el, button } from "/rpc.js";
import { showTree } from "/tree.js";
import { showGit } from "/git.js";

const $ = (id) => document.getElementById(id);
let current = null;

/** An approval with its calls and the two answers. */
export function approvalItem(a, after) {
  const li = el("li");
  li.append(el("div", `${a.session_name || a.session_id}`, "state"));
  for (const c of a.calls) {
    li.append(el("div", `${c.name} (risk ${c.risk})`, "meta"));
    li.append(el("pre", c.summary));
  }
  const answer = (decision) => async () => {
    try {
      await call("approval.answer", { session: a.session_id, decision, approval_id: a.approval_id });
    } catch (e) {
      li.append(el("div", String(e.message || e), "meta"));
    }
    after();
  };
  li.append(button("Approve", answer("approve_all")), button("Deny", answer("deny_all")));
  return li;
}

/** The model, branch and cost under the session's title. */
let status = "";
function showStatus() {
  if (!current) return;
  const cost = typeof current.cost === "number" ? ` · $${current.cost.toFixed(4)}` : "";
  $("status").textContent = `${status}${cost}`;
}

export function leaveSession() {
  if (current && current.sub !== null) unsubscribe(current.sub);
  current = null;
}

// A terminal's escapes and other control characters are not shown.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

function block(role, text) {
  const d = el("div", undefined, `msg ${role}`);
  d.append(el("div", role, "role"));
  d.append(el("pre", String(text).replace(CONTROL, "")));
  $("transcript").append(d);
  return d;
}

/** Shows `blocks`' texts as the daemon renders them (markdown, math;
 *  inert HTML: raw HTML is text, links only to http(s)). */
async function render(blocks) {
  if (!blocks.length) return;
  try {
    const html = await call("web.render", { texts: blocks.map((b) => b.querySelector("pre").textContent) });
    blocks.forEach((b, i) => {
      const body = el("div", undefined, "md");
      body.innerHTML = html[i];
      b.querySelector("pre").replaceWith(body);
    });
  } catch (_) { /* left as plain text */ }
}

async function showHistory(history) {
  $("transcript").replaceChildren();
  const prose = [];
  for (const m of history.messages) {
    if (m.role === "tool") {
      const r = m.tool_result || {};
      block("tool", `${r.name || "tool"}${r.is_error ? " (error)" : ""}\n${m.text}`);
      continue;
    }
    const d = block(m.role, m.text);
    if (m.role === "assistant") prose.push(d);
    for (const c of m.tool_calls || []) d.append(el("div", `→ ${c.name} ${c.arguments}`, "meta"));
  }
  await render(prose);
}

async function showApproval(id) {
  const approvals = await call("approval.list");
  const mine = approvals.filter((a) => a.session_id === id);
  $("approval").replaceChildren(...mine.map((a) => approvalItem(a, () => showApproval(id))));
}

function onItem(item) {
  if (!current) return;
  if (item.type === "event") {
    current.seq = item.seq;
    const k = item.kind;
    if (k === "turn_started") { block("user", item.text); current.live = null; }
    else if (k === "thinking_delta") {
      // Folded: opened on demand.
      if (!current.thinking) {
        const d = el("details", undefined, "msg thinking");
        d.append(el("summary", "thinking"));
        d.append(el("pre", ""));
        $("transcript").append(d);
        current.thinking = d.querySelector("pre");
      }
      current.thinking.textContent += item.text.replace(CONTROL, "");
    } else if (k === "plan_updated") {
      const box = $("plan-steps");
      box.replaceChildren(el("div", "Plan", "state"));
      for (const s of item.steps) box.append(el("div", `${s.status === "completed" ? "✓" : s.status === "in_progress" ? "…" : "○"} ${s.step}`, "meta"));
      if (item.note) box.append(el("div", item.note, "meta"));
    } else if (k === "usage" && item.session) {
      current.cost = item.session.cost_usd;
      showStatus();
    } else if (k === "text_delta") {
      current.thinking = null;
      if (!current.live) current.live = block("assistant", "").querySelector("pre");
      current.live.textContent += item.text.replace(CONTROL, "");
    } else if (k === "tool_running") { block("tool", `${item.name} running…`); current.live = null; }
    else if (k === "tool_output") { block("tool", item.text); }
    else if (k === "tool_result") { block("tool", `${item.name}${item.is_error ? " (error)" : ""}\n${item.output}`); current.live = null; }
    else if (k === "approval_requested" || k === "approval_resolved") { showApproval(current.id); }
    else if (k === "turn_finished") {
      const done = current.live && current.live.parentElement;
      current.live = null;
      $("state").textContent = `turn ${item.status}`;
      current.thinking = null;
      if (done) render([done]);
    }
    else if (k === "error") { block("error", item.error || "failed"); }
    $("transcript").lastElementChild?.scrollIntoView({ block: "end" });
  } else if (item.type === "closed") {
    $("state").textContent = `closed: ${item.reason}`;
  }
}

/** Shows session `id`: its history as stored, then its events from the
 *  next seq on. After a dropped link (the daemon restarted, the network
 *  came back) the same happens again, so what the page shows is what the
 *  store holds: nothing lost, nothing twice. */
export async function showSession(id) {
  if (current) leaveSession();
  const info = await call("session.show", { session: id }).catch(() => null);
  $("title").textContent = info ? (info.name || info.id) : id;
  const branch = info && info.git ? ` · branch ${info.git.branch}` : "";
  status = info ? `${info.model}${branch}` : "";
  $("state").textContent = info ? info.state.replaceAll("_", " ") : "";
  await showHistory(await call("session.history", { session: id }));
  const from = info ? info.last_seq + 1 : 0;
  current = { id, seq: from - 1, live: null, sub: null, thinking: null, cost: info && info.usage ? info.usage.cost_usd : null };
  $("plan-steps").replaceChildren();
  showStatus();
  current.sub = await subscribe(id, from, onItem);
  showApproval(id);
  showGit(id, info);
}

async function send(kind) {
  const text = $("compose").value.trim();
  if (!current || (!text && kind !== "cancel")) return;
  try {
    if (kind === "send") await call("session.send", { session: current.id, text });
    if (kind === "steer") await call("session.steer", { session: current.id, text });
    if (kind === "cancel") await call("session.cancel", { session: current.id });
    if (kind !== "cancel") $("compose").value = "";
  } catch (e) {
    block("error", String(e.message || e));
  }
}

async function undo() {
  if (!current) return;
  const plan = $("plan");
  plan.replaceChildren();
  try {
    const dry = await call("session.rewind", { session: current.id, dry_run: true });
    plan.append(el("div", `Undo the last turn: ${dry.files.length} file(s)`, "state"));
    for (const f of dry.files) plan.append(el("div", `${f.action} ${f.path}${f.conflict ? " (changed since)" : ""}${f.note ? ` — ${f.note}` : ""}`, "meta"));
    plan.append(button("Restore", async () => {
      try {
        const done = await call("session.rewind", { session: current.id });
        plan.replaceChildren(el("div", `Undone: ${done.files.length} file(s) restored`, "state"));
        await showHistory(await call("session.history", { session: current.id }));
      } catch (e) { plan.append(el("div", String(e.message || e), "meta")); }
    }), button("Keep", () => plan.replaceChildren()));
  } catch (e) {
    plan.append(el("div", String(e.message || e), "meta"));
  }
}

$("send").addEventListener("click", () => send("send"));
// On a keyboard: Ctrl+Enter (⌘+Enter) sends, Alt+Enter steers.
$("compose").addEventListener("keydown", (e) => {
  if (e.key !== "Enter") return;
  if (e.ctrlKey || e.metaKey) { e.preventDefault(); send("send"); }
  else if (e.altKey) { e.preventDefault(); send("steer"); }
});
$("steer").addEventListener("click", () => send("steer"));
$("cancel").addEventListener("click", () => send("cancel"));
$("undo").addEventListener("click", undo);
// Switching the session's model (and provider) and temperature from its
// next request on, as `forgectl model` does.
$("model-box").addEventListener("toggle", async () => {
  if (!$("model-box").open || !current) return;
  const [models, info] = await Promise.all([call("models.list", {}), call("session.show", { session: current.id })]);
  $("model").replaceChildren(...models.map((m) => {
    const o = el("option", `${m.name} (${m.provider})`);
    o.value = `${m.provider}\u0000${m.name}`;
    o.selected = m.name === info.model && m.provider === info.provider;
    return o;
  }));
  $("temperature").value = info.temperature !== undefined ? info.temperature : "";
});
$("configure").addEventListener("click", async () => {
  if (!current) return;
  const [provider, model] = $("model").value.split("\u0000");
  const params = { session: current.id, provider, model };
  const t = $("temperature").value.trim();
  if (t !== "") params.temperature = Number(t);
  try {
    const info = await call("session.configure", params);
    const t = info.temperature !== undefined ? `, temperature ${info.temperature}` : "";
    $("model-out").textContent = `from the next request: ${info.model}${t}`;
  } catch (e) {
    $("model-out").textContent = String(e.message || e);
  }
});
$("tree-box").addEventListener("toggle", () => {
  if ($("tree-box").open && current) {
    const id = current.id;
    showTree(id, () => showSession(id));
  }
});
