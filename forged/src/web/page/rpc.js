// The daemon's JSON-RPC over one WebSocket, the device cookie standing
// for the listener's token. Calls wait for their answer; subscriptions
// get `session.event` notifications. A dropped link reconnects and says
// so (`onLink`); a browser signed out is told and stops trying.
let ws = null;
let next = 1;
const waiting = new Map();
const subscriptions = new Map();
const listeners = { link: () => {}, open: () => {} };

export function on(name, f) { listeners[name] = f; }

export function call(method, params = {}) {
  return new Promise((resolve, reject) => {
    if (!ws || ws.readyState !== WebSocket.OPEN) return reject(new Error("not connected"));
    const id = next++;
    waiting.set(id, { resolve, reject });
    ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
  });
}

/** Follows a session from `fromSeq`: `onItem` gets each SubscriptionItem. */
export async function subscribe(session, fromSeq, onItem) {
  const id = await call("session.subscribe", { session, from_seq: fromSeq });
  subscriptions.set(String(id), onItem);
  return id;
}

export async function unsubscribe(id) {
  subscriptions.delete(String(id));
  try { await call("session.unsubscribe", { subscription: id }); } catch (_) { /* gone with the link */ }
}

export function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  ws = new WebSocket(`${proto}://${location.host}/`);
  ws.addEventListener("open", async () => {
    // Named in what it does (`forgectl ps`, the history's `client`): the
    // page comes from this daemon, so its protocol version is the page's.
    try {
      const d = await call("daemon.status");
      await call("hello", { protocol_version: d.protocol_version,
        client: { name: "forge-web", version: d.version, kind: "browser" } });
    } catch (_) { /* works unnamed */ }
    listeners.link("live", false);
    listeners.open();
  });
  ws.addEventListener("message", (m) => {
    let msg;
    try { msg = JSON.parse(m.data); } catch (_) { return; }
    if (msg.method === "session.event" && msg.params) {
      const f = subscriptions.get(String(msg.params.subscription));
      if (f) f(msg.params.result);
      return;
    }
    const w = msg.id !== undefined && waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(msg.error.message)); else w.resolve(msg.result);
  });
  ws.addEventListener("close", async () => {
    for (const w of waiting.values()) w.reject(new Error("disconnected"));
    waiting.clear();
    subscriptions.clear();
    let status = 0;
    try {
      const r = await fetch("/", { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "daemon.status" }) });
      status = r.status;
    } catch (_) { /* unreachable: retried below */ }
    if (status === 401) {
      listeners.link("this browser is signed out: run `forgectl web` for a new link", true);
      return;
    }
    listeners.link("connection lost: reconnecting…", true);
    setTimeout(connect, 1000);
  });
}

export function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

export function button(label, onClick) {
  const b = el("button", label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}
