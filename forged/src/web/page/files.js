// The files a session's calls read or changed, listed beside the chat
// (newest on top); one opens highlighted, as the session's tools would
// read it now (`session.file`: its roots and deny rules, text only).
import { call, el, button } from "/rpc.js";
import { fenced } from "/transcript.js";

const $ = (id) => document.getElementById(id);
let session = null;
let files = [];

/** Starts the list afresh for session `id`. */
export function filesFor(id) {
  session = id;
  files = [];
  $("files").replaceChildren();
  $("file-view").replaceChildren();
  $("files-box").hidden = true;
}

/** Adds `path` to the list (moved to the top when it is there). */
export function showFile(path) {
  if (files[0] === path) return;
  files = [path, ...files.filter((f) => f !== path)];
  $("files-box").hidden = false;
  $("files").replaceChildren(...files.map((f) => {
    const li = el("li");
    li.append(button(f, () => open(f)));
    return li;
  }));
}

async function open(path) {
  const view = $("file-view");
  view.replaceChildren(el("div", path, "state"));
  try {
    const file = await call("session.file", { session, path });
    const ext = (path.match(/\.([A-Za-z0-9_+-]+)$/) || [])[1] || "";
    const [html] = await call("web.render", { texts: [fenced(ext, file.text)] });
    const body = el("div", undefined, "md");
    body.innerHTML = html;
    const more = file.truncated ? ` (the first ${file.text.length} of ${file.bytes} bytes)` : "";
    view.append(el("div", `${file.bytes} bytes${more}`, "meta"), body);
  } catch (e) {
    view.append(el("div", String(e.message || e), "meta"));
  }
}
