// A session's transcript as the TUI shows it: messages (markdown, math
// and highlighted code, rendered by the daemon into inert HTML), the
// model's thinking folded, and each tool call as one box: what it asks
// (an edit or a patch as its diff, a command as a shell line), its output
// as it streams, then its result as the model saw it. The history and the
// live events build the same boxes, so a reload shows what streamed.
import { call, el } from "/rpc.js";

// A terminal's escapes and other control characters are not shown.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
const clean = (t) => String(t ?? "").replace(CONTROL, "");
// What a preview shows of a long file before it says how much is left.
const PREVIEW_LINES = 400;

/** `text` fenced as `lang`, with a fence longer than any run of
 *  backticks inside it. */
export function fenced(lang, text) {
  const runs = String(text).match(/`+/g) || [];
  const fence = "`".repeat(Math.max(3, ...runs.map((r) => r.length + 1)));
  return `${fence}${lang}\n${String(text).replace(/\n$/, "")}\n${fence}`;
}

function prefixed(text, mark) {
  const lines = String(text).replace(/\n$/, "").split("\n");
  const shown = lines.slice(0, PREVIEW_LINES).map((l) => mark + l);
  if (lines.length > PREVIEW_LINES) shown.push(`${mark}… ${lines.length - PREVIEW_LINES} more lines`);
  return shown.join("\n");
}

/** What a call asks, as markdown: edits and patches as diffs. */
export function preview(name, argsText) {
  let a;
  try { a = JSON.parse(argsText || "{}"); } catch (_) { return fenced("", argsText); }
  if (!a || typeof a !== "object") return fenced("json", argsText);
  const p = typeof a.path === "string" ? a.path : "";
  if (name === "edit" && typeof a.old_string === "string" && typeof a.new_string === "string") {
    const old = a.old_string ? `${prefixed(a.old_string, "-")}\n` : "";
    return fenced("diff", `--- a/${p}\n+++ b/${p}\n${old}${prefixed(a.new_string, "+")}`);
  }
  if (name === "write_file" && typeof a.content === "string") {
    return fenced("diff", `+++ b/${p}\n${prefixed(a.content, "+")}`);
  }
  if (name === "apply_patch" && typeof a.patch === "string") return fenced("diff", a.patch);
  if (name === "delete_file") return fenced("diff", `--- a/${p}\n+++ /dev/null`);
  if (name === "run_command" && typeof a.command === "string") return fenced("sh", `$ ${a.command}`);
  return fenced("json", JSON.stringify(a, null, 2));
}

/** The files a call reads or changes (a patch names them in its
 *  `*** Add/Update/Delete File:` lines). */
export function touched(name, argsText) {
  let a = {};
  try { a = JSON.parse(argsText || "{}") || {}; } catch (_) { return []; }
  if (name === "apply_patch" && typeof a.patch === "string") {
    return [...a.patch.matchAll(/^\*\*\* (?:Add|Update|Delete) File: (.+)$/gm)].map((m) => m[1].trim());
  }
  const files = ["read_file", "write_file", "edit", "delete_file"];
  return files.includes(name) && typeof a.path === "string" ? [a.path] : [];
}

/** One line of what a call is about, for its box's summary. */
function headline(name, argsText) {
  let a = {};
  try { a = JSON.parse(argsText || "{}") || {}; } catch (_) { /* shown as sent */ }
  const what = a.command || a.path || a.pattern || a.query || a.url || "";
  return clean(`${name}${what ? ` ${String(what).split("\n")[0].slice(0, 120)}` : ""}`);
}

export class Transcript {
  constructor(root, onFile = () => {}) {
    this.root = root;
    this.onFile = onFile;
    this.calls = new Map();
    this.byIndex = new Map();
    this.live = null;
    this.thinking = null;
    this.pending = [];
  }

  clear() {
    this.root.replaceChildren();
    this.calls.clear();
    this.byIndex.clear();
    this.live = null;
    this.thinking = null;
    this.pending = [];
  }

  /** A message, shown as plain text until `flush` renders it. */
  message(role, text, markdown = role === "assistant") {
    const d = el("div", undefined, `msg ${role}`);
    d.append(el("div", role, "role"));
    const body = el("pre", clean(text));
    d.append(body);
    this.root.append(d);
    if (markdown) this.pending.push({ body, md: () => body.textContent });
    return d;
  }

  /** Renders what waits, in one call (inert HTML from the daemon). */
  async flush() {
    const items = this.pending.splice(0);
    if (!items.length) return;
    try {
      const html = await call("web.render", { texts: items.map((i) => i.md()) });
      items.forEach((item, n) => {
        const body = el("div", undefined, item.cls || "md");
        body.innerHTML = html[n];
        item.body.replaceWith(body);
      });
    } catch (_) { /* left as plain text */ }
  }

  /** The box of call `id` (made on first sight). */
  call(id, name) {
    let c = this.calls.get(id);
    if (c) return c;
    const box = el("details", undefined, "msg call");
    const summary = el("summary", clean(name));
    const asks = el("pre", "");
    const output = el("pre", "", "output");
    output.hidden = true;
    box.append(summary, asks, output);
    this.root.append(box);
    c = { id, name, args: "", box, summary, asks, output, shown: false };
    this.calls.set(id, c);
    return c;
  }

  /** Shows what call `c` asks, once its arguments are whole. */
  describe(c) {
    if (c.shown) return;
    c.shown = true;
    c.summary.textContent = headline(c.name, c.args);
    for (const f of touched(c.name, c.args)) this.onFile(f);
    const edit = ["edit", "write_file", "apply_patch", "delete_file"].includes(c.name);
    // An edit shows its diff at once; anything else on demand.
    if (edit) c.box.open = true;
    const md = preview(c.name, c.args);
    c.asks.textContent = md;
    this.pending.push({ body: c.asks, md: () => md, cls: "md asks" });
  }

  output(c, text) {
    c.output.hidden = false;
    c.output.textContent += clean(text);
  }

  result(c, isError, text) {
    c.box.classList.toggle("failed", Boolean(isError));
    c.box.classList.add("done");
    c.output.hidden = false;
    c.output.textContent = clean(text);
    if (isError) c.box.open = true;
  }

  /** The stored history, as a reload or a reconnect shows it. */
  async history(messages) {
    this.clear();
    for (const m of messages) {
      if (m.role === "tool") {
        const r = m.tool_result || {};
        const c = this.calls.get(r.call_id) || this.call(r.call_id || `result-${m.id}`, r.name || "tool");
        this.result(c, r.is_error, m.text);
        continue;
      }
      // A call's id is unique within its turn only.
      if (m.role === "user") this.calls.clear();
      if (m.text || !(m.tool_calls || []).length) {
        const d = this.message(m.role, m.text);
        for (const img of m.images || []) d.append(image(img));
      }
      for (const tc of m.tool_calls || []) {
        const c = this.call(tc.id, tc.name);
        c.args = typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments);
        this.describe(c);
      }
    }
    await this.flush();
  }

  /** One live event of the session. */
  event(item) {
    const k = item.kind;
    if (k === "turn_started") {
      this.calls.clear();
      const d = this.message("user", item.text, false);
      for (const img of item.images || []) d.append(image(img));
      this.live = null;
    } else if (k === "thinking_delta") {
      // Folded: opened on demand.
      if (!this.thinking) {
        const d = el("details", undefined, "msg thinking");
        d.append(el("summary", "thinking"), el("pre", ""));
        this.root.append(d);
        this.thinking = d.querySelector("pre");
      }
      this.thinking.textContent += clean(item.text);
    } else if (k === "text_delta") {
      this.thinking = null;
      if (!this.live) this.live = this.message("assistant", "").querySelector("pre");
      this.live.textContent += clean(item.text);
    } else if (k === "tool_call_started") {
      this.live = null;
      this.thinking = null;
      this.byIndex.set(item.index, this.call(item.call_id, item.name));
    } else if (k === "tool_call_args") {
      const c = this.byIndex.get(item.index);
      if (c) c.args += item.fragment;
    } else if (k === "tool_running") {
      const c = this.call(item.call_id, item.name);
      this.describe(c);
      c.summary.textContent = `${headline(c.name, c.args)} — running`;
      this.flush();
    } else if (k === "tool_output") {
      this.output(this.call(item.call_id, "tool"), item.text);
    } else if (k === "tool_result") {
      const c = this.call(item.call_id, item.name);
      this.describe(c);
      c.summary.textContent = headline(c.name, c.args);
      this.result(c, item.is_error, item.output);
      this.flush();
    } else if (k === "approval_requested") {
      // What the approval asks about is shown in its box before it runs.
      for (const a of item.calls || []) {
        const c = this.call(a.call_id, a.name);
        if (!c.args) c.args = typeof a.arguments === "string" ? a.arguments : JSON.stringify(a.arguments);
        this.describe(c);
      }
      this.flush();
    } else if (k === "assistant_node" || k === "stream_resumed") {
      this.live = null;
    } else if (k === "turn_finished") {
      this.live = null;
      this.thinking = null;
      this.byIndex.clear();
      this.flush();
    } else if (k === "error") {
      this.message("error", item.error || "failed", false);
    } else {
      return;
    }
    this.root.lastElementChild?.scrollIntoView({ block: "end" });
  }
}

// The kinds of image the daemon keeps; nothing else becomes a data URL.
const SHOWN_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/** An image a message carries, fetched from the daemon's store. */
function image(info) {
  const fig = el("figure", undefined, "image");
  const label = el("figcaption", `${info.name || "image"}, ${info.width}×${info.height}`, "meta");
  fig.append(label);
  call("images.get", { hash: info.hash }).then((got) => {
    if (!SHOWN_TYPES.includes(got.info.mime_type)) return;
    const img = el("img");
    img.alt = info.name || "image";
    img.src = `data:${got.info.mime_type};base64,${got.data}`;
    fig.prepend(img);
  }).catch(() => { /* the caption stays */ });
  return fig;
}
