// The compose box of a session: send (queued by the daemon while a turn
// runs), steer, cancel; images picked or pasted (kept by the daemon with
// `images.put`, then named in the send); slash commands completed from
// the session's own list (the user's, the project's once trusted, MCP
// prompts).
import { call, el, button } from "/rpc.js";

const $ = (id) => document.getElementById(id);
// As the daemon's limit (MAX_IMAGE_BYTES): checked here to save a trip.
const MAX_IMAGE_BYTES = 6 * 1024 * 1024;

let session = null;
let images = [];
let commands = [];
let onError = () => {};

/** Binds the box to session `id` (`fail` shows an error in its transcript). */
export async function composeFor(id, fail) {
  session = id;
  onError = fail;
  images = [];
  showImages();
  commands = [];
  $("command-hints").replaceChildren();
  try {
    commands = await call("commands.list", { session: id });
  } catch (_) { /* no completion */ }
}

function showImages() {
  $("images").replaceChildren(...images.map((img, i) => {
    const chip = el("span", `${img.name || "image"} (${img.width}×${img.height})`, "chip");
    chip.append(button("×", () => { images.splice(i, 1); showImages(); }));
    chip.lastChild.setAttribute("aria-label", `remove ${img.name || "image"}`);
    return chip;
  }));
}

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** Keeps `file` in the daemon's store, to be sent with the message. */
async function attach(file) {
  if (!file || !file.type.startsWith("image/")) return;
  if (file.size > MAX_IMAGE_BYTES) {
    onError(`${file.name || "the image"} is ${Math.round(file.size / 1048576)} MiB: images may be 6 MiB at most`);
    return;
  }
  try {
    const info = await call("images.put", { data: base64(await file.arrayBuffer()), mime_type: file.type, name: file.name || undefined });
    images.push(info);
    showImages();
  } catch (e) {
    onError(String(e.message || e));
  }
}

async function send(kind) {
  const text = $("compose").value.trim();
  if (!session || (!text && !images.length && kind !== "cancel")) return;
  try {
    if (kind === "send") {
      const params = { session, text };
      if (images.length) params.images = images.map((i) => ({ hash: i.hash, name: i.name }));
      await call("session.send", params);
      images = [];
      showImages();
    }
    if (kind === "steer") await call("session.steer", { session, text });
    if (kind === "cancel") await call("session.cancel", { session });
    if (kind !== "cancel") $("compose").value = "";
  } catch (e) {
    onError(String(e.message || e));
  }
}

/** What the slash command being typed could be, as hints under the box. */
function hints() {
  const text = $("compose").value;
  const m = text.match(/^\/(\S*)$/);
  const box = $("command-hints");
  if (!m) { box.replaceChildren(); return; }
  const found = commands.filter((c) => c.name.startsWith(m[1])).slice(0, 8);
  box.replaceChildren(...found.map((c) => {
    const hint = c.argument_hint ? ` ${c.argument_hint}` : "";
    const b = button(`/${c.name}${hint}`, () => {
      $("compose").value = `/${c.name} `;
      box.replaceChildren();
      $("compose").focus();
    });
    if (c.description) b.append(el("span", ` — ${c.description} (${c.source})`, "meta"));
    return b;
  }));
}

$("send").addEventListener("click", () => send("send"));
// On a keyboard: Ctrl+Enter (⌘+Enter) sends, Alt+Enter steers; Tab
// completes a slash command with one match.
$("compose").addEventListener("keydown", (e) => {
  if (e.key === "Tab" && !e.shiftKey) {
    const m = $("compose").value.match(/^\/(\S*)$/);
    const found = m ? commands.filter((c) => c.name.startsWith(m[1])) : [];
    if (found.length === 1) { e.preventDefault(); $("compose").value = `/${found[0].name} `; hints(); }
    return;
  }
  if (e.key !== "Enter") return;
  if (e.ctrlKey || e.metaKey) { e.preventDefault(); send("send"); }
  else if (e.altKey) { e.preventDefault(); send("steer"); }
});
$("compose").addEventListener("input", hints);
$("compose").addEventListener("paste", (e) => {
  for (const item of e.clipboardData ? e.clipboardData.items : []) {
    if (item.kind === "file" && item.type.startsWith("image/")) { e.preventDefault(); attach(item.getAsFile()); }
  }
});
$("attach").addEventListener("change", async () => {
  for (const f of $("attach").files) await attach(f);
  $("attach").value = "";
});
$("steer").addEventListener("click", () => send("steer"));
$("cancel").addEventListener("click", () => send("cancel"));
