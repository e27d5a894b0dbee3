// The page: the sessions and one inbox of every pending approval, or one
// session (`#/s/ID`). Everything shown is built with textContent: model
// output, names and paths render inert.
import { on, call, connect, el } from "/rpc.js";
import { showSession, leaveSession, approvalItem } from "/session.js";

const $ = (id) => document.getElementById(id);

/** The sessions, each helper agent's right under its parent. */
function ordered(list) {
  const byParent = new Map();
  for (const s of list) {
    const p = s.helper ? s.helper.parent : "";
    if (!byParent.has(p)) byParent.set(p, []);
    byParent.get(p).push(s);
  }
  const ids = new Set(list.map((s) => s.id));
  const out = [];
  const walk = (p, depth) => {
    for (const s of byParent.get(p) || []) {
      out.push([s, depth]);
      walk(s.id, depth + 1);
    }
  };
  walk("", 0);
  // Helpers whose parent is not listed still show.
  for (const [p, kids] of byParent) if (p && !ids.has(p)) for (const s of kids) out.push([s, 1]);
  return out;
}

function showSessions(list) {
  const ul = $("sessions");
  ul.replaceChildren();
  for (const [s, depth] of ordered(list)) {
    const li = el("li", undefined, depth ? "helper" : "");
    li.style.marginLeft = `${Math.min(depth, 4) * 1.2}rem`;
    if (s.helper) li.append(el("div", `helper: ${s.helper.description} (${s.helper.agent})`, "meta"));
    const a = el("a", s.name || s.id);
    a.href = `#/s/${encodeURIComponent(s.id)}`;
    li.append(a);
    const cost = s.usage && s.usage.cost_usd ? ` · $${s.usage.cost_usd.toFixed(4)}` : "";
    li.append(el("div", `${s.state.replaceAll("_", " ")} · ${s.waiting_on}`, "state"));
    li.append(el("div", `${s.cwd} · ${s.model} · ${s.attached_clients} client(s)${cost}`, "meta"));
    ul.append(li);
  }
}

function showInbox(approvals) {
  const ul = $("inbox");
  ul.replaceChildren(...approvals.map((a) => approvalItem(a, refresh)));
  $("inbox-empty").hidden = approvals.length > 0;
}

async function refresh() {
  try {
    const [sessions, approvals] = await Promise.all([call("session.list"), call("approval.list")]);
    showSessions(sessions);
    showInbox(approvals);
  } catch (_) {
    // Shown by the link state; the next connection refreshes.
  }
}

function route() {
  const m = location.hash.match(/^#\/s\/(.+)$/);
  $("home").hidden = !!m;
  $("session").hidden = !m;
  if (m) showSession(decodeURIComponent(m[1]));
  else { leaveSession(); refresh(); }
}

on("link", (text, down) => { $("link").textContent = text; $("link").className = down ? "down" : ""; });
on("open", route);
window.addEventListener("hashchange", route);
connect();
setInterval(() => { if (!location.hash) refresh(); }, 2000);
