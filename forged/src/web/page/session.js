// One session: its transcript (the history, then its events live from
// the next seq, resumed from the last one shown after a dropped link), its
// compose box, its pending approval, its plan, model and cost, and undo
// of the last turn after its plan is shown.
import { call, subscribe, unsubscribe, el, button } from "/rpc.js";
import { showTree } from "/tree.js";
import { showGit } from "/git.js";
import { Transcript } from "/transcript.js";
import { composeFor } from "/compose.js";
import { filesFor, showFile } from "/files.js";

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

const transcript = new Transcript($("transcript"), (path) => showFile(path));
const fail = (text) => transcript.message("error", text, false);

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
    if (k === "plan_updated") {
      const box = $("plan-steps");
      box.replaceChildren(el("div", "Plan", "state"));
      for (const s of item.steps) box.append(el("div", `${s.status === "completed" ? "✓" : s.status === "in_progress" ? "…" : "○"} ${s.step}`, "meta"));
      if (item.note) box.append(el("div", item.note, "meta"));
    } else if (k === "usage" && item.session) {
      current.cost = item.session.cost_usd;
      showStatus();
    } else if (k === "approval_requested" || k === "approval_resolved") {
      showApproval(current.id);
    } else if (k === "turn_finished") {
      $("state").textContent = `turn ${item.status}`;
    }
    transcript.event(item);
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
  // The view is this session's at once (its boxes work while its history
  // loads); a view opened meanwhile supersedes this one.
  const mine = { id, seq: -1, sub: null, cost: null };
  current = mine;
  const info = await call("session.show", { session: id }).catch(() => null);
  if (current !== mine) return;
  $("title").textContent = info ? (info.name || info.id) : id;
  const branch = info && info.git ? ` · branch ${info.git.branch}` : "";
  status = info ? `${info.model}${branch}` : "";
  $("state").textContent = info ? info.state.replaceAll("_", " ") : "";
  filesFor(id);
  $("plan-steps").replaceChildren();
  const from = info ? info.last_seq + 1 : 0;
  mine.seq = from - 1;
  mine.cost = info && info.usage ? info.usage.cost_usd : null;
  showStatus();
  const history = await call("session.history", { session: id });
  if (current !== mine) return;
  await transcript.history(history.messages);
  const sub = await subscribe(id, from, onItem);
  if (current !== mine) { unsubscribe(sub); return; }
  mine.sub = sub;
  showApproval(id);
  showGit(id, info);
  composeFor(id, fail);
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
        await transcript.history((await call("session.history", { session: current.id })).messages);
      } catch (e) { plan.append(el("div", String(e.message || e), "meta")); }
    }), button("Keep", () => plan.replaceChildren()));
  } catch (e) {
    plan.append(el("div", String(e.message || e), "meta"));
  }
}

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
