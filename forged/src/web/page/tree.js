// A session's conversation drawn as a tree: every branch, bookmarks,
// summaries, the head. A node offers checkout (the head moves there),
// fork (a new session from it), edit and resend (a user message) and
// rewind (files and conversation back to it), the rewind's plan shown
// before anything changes.
import { call, el, button } from "/rpc.js";

const $ = (id) => document.getElementById(id);

function plan(session, node, after) {
  return async () => {
    const box = $("plan");
    box.replaceChildren();
    try {
      const dry = await call("session.rewind", { session, node, dry_run: true });
      box.append(el("div", `Rewind to this point: ${dry.files.length} file(s)`, "state"));
      for (const f of dry.files) {
        box.append(el("div", `${f.action} ${f.path}${f.conflict ? " (changed since)" : ""}${f.note ? ` — ${f.note}` : ""}`, "meta"));
      }
      box.append(button("Restore", async () => {
        try {
          const done = await call("session.rewind", { session, node });
          box.replaceChildren(el("div", `Rewound: ${done.files.length} file(s) restored`, "state"));
          after();
        } catch (e) { box.append(el("div", String(e.message || e), "meta")); }
      }), button("Keep", () => box.replaceChildren()));
      box.scrollIntoView({ block: "nearest" });
    } catch (e) {
      box.append(el("div", String(e.message || e), "meta"));
    }
  };
}

/** A user message edited, then answered again as a new branch (the
 *  original stays in the tree). */
function edit(session, node, after) {
  return async () => {
    const box = $("plan");
    const history = await call("session.history", { session }).catch(() => null);
    const full = history && history.messages.find((m) => m.id === node.id);
    const text = el("textarea");
    text.rows = 3;
    text.value = full ? full.text : node.preview;
    text.setAttribute("aria-label", "the message, edited");
    box.replaceChildren(el("div", "Edit and resend", "state"), text, button("Send", async () => {
      try {
        await call("session.edit", { session, node: node.id, text: text.value });
        box.replaceChildren(el("div", "Sent as a new branch", "state"));
        after();
      } catch (e) { box.append(el("div", String(e.message || e), "meta")); }
    }), button("Keep", () => box.replaceChildren()));
    text.focus();
  };
}

function act(f, after) {
  return async () => {
    try { await f(); } catch (e) { $("plan").replaceChildren(el("div", String(e.message || e), "meta")); }
    after();
  };
}

/** Draws session `session`'s tree in `#tree`; `after` runs once the
 *  session changed (the transcript is shown again). */
export async function showTree(session, after) {
  let info;
  try {
    info = await call("session.tree", { session });
  } catch (e) {
    $("tree").replaceChildren(el("div", String(e.message || e), "meta"));
    return;
  }
  const children = new Map();
  for (const n of info.nodes) {
    const k = n.parent_id || "";
    if (!children.has(k)) children.set(k, []);
    children.get(k).push(n);
  }
  const redraw = () => { after(); showTree(session, after); };
  const draw = (parent) => {
    const ul = el("ul", undefined, "tree");
    for (const n of children.get(parent) || []) {
      const li = el("li", undefined, n.on_path ? "on-path" : "");
      const head = n.id === info.head ? " ← head" : "";
      const bookmarks = n.bookmarks || [];
      const files = n.files || [];
      const marks = bookmarks.length ? ` [${bookmarks.join(", ")}]` : "";
      li.append(el("div", `${n.role}: ${n.preview}${marks}${head}`, n.role === "user" ? "state" : "meta"));
      if (files.length) li.append(el("div", `changed ${files.length} file(s)`, "meta"));
      if (n.role !== "tool") {
        li.append(
          button("Go here", act(() => call("session.checkout", { session, node: n.id }), redraw)),
          button("Fork", act(() => call("session.fork", { session, node: n.id }), redraw)),
          button("Rewind here…", plan(session, n.id, redraw)),
        );
      }
      if (n.role === "user") li.append(button("Edit and resend…", edit(session, n, redraw)));
      const below = draw(n.id);
      if (below.children.length) li.append(below);
      ul.append(li);
    }
    return ul;
  };
  $("tree").replaceChildren(draw(""));
}
