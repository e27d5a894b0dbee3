// The page speaks the daemon's JSON-RPC over a WebSocket, its device
// cookie standing for the listener's token. Everything shown is built
// with textContent: model output and names render inert.
const $ = (id) => document.getElementById(id);
let ws = null;
let next = 1;
const waiting = new Map();

function call(method, params = {}) {
  return new Promise((resolve, reject) => {
    if (!ws || ws.readyState !== WebSocket.OPEN) return reject(new Error("not connected"));
    const id = next++;
    waiting.set(id, { resolve, reject });
    ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
  });
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function showSessions(list) {
  const ul = $("sessions");
  ul.replaceChildren();
  for (const s of list) {
    const li = el("li");
    li.append(el("div", s.name || s.id));
    const cost = s.usage && s.usage.cost_usd ? ` · $${s.usage.cost_usd.toFixed(4)}` : "";
    li.append(el("div", `${s.state.replaceAll("_", " ")} · ${s.waiting_on}`, "state"));
    li.append(el("div", `${s.cwd} · ${s.model} · ${s.attached_clients} client(s)${cost}`, "meta"));
    ul.append(li);
  }
}

function showInbox(approvals) {
  const ul = $("inbox");
  ul.replaceChildren();
  $("inbox-empty").hidden = approvals.length > 0;
  for (const a of approvals) {
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
      refresh();
    };
    const approve = el("button", "Approve");
    approve.addEventListener("click", answer("approve_all"));
    const deny = el("button", "Deny");
    deny.addEventListener("click", answer("deny_all"));
    li.append(approve, deny);
    ul.append(li);
  }
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

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${proto}://${location.host}/`);
  ws.addEventListener("open", () => {
    $("link").textContent = "live";
    $("link").className = "";
    refresh();
  });
  ws.addEventListener("message", (m) => {
    let msg;
    try { msg = JSON.parse(m.data); } catch (_) { return; }
    const w = msg.id !== undefined && waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(msg.error.message)); else w.resolve(msg.result);
  });
  ws.addEventListener("close", async () => {
    for (const w of waiting.values()) w.reject(new Error("disconnected"));
    waiting.clear();
    $("link").className = "down";
    // Signed out (revoked, or the token rotated): say so and stop; a
    // daemon restarting or a network gone: try again.
    let status = 0;
    try {
      const r = await fetch("/", { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "daemon.status" }) });
      status = r.status;
    } catch (_) { /* unreachable: retried below */ }
    if (status === 401) {
      $("link").textContent = "this browser is signed out: run `forgectl web` for a new link";
      return;
    }
    $("link").textContent = "connection lost: reconnecting…";
    setTimeout(connect, 1000);
  });
}

connect();
setInterval(refresh, 2000);
