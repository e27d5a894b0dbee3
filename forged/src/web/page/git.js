// A git session, as seed-style windows draw it: its branch's commits (a
// commit per turn, checkpoints marked, the tips undo and reword left), a
// diff viewer for any commit and
// for the running turn before its commit, and the operations `forgectl
// git` offers, with the same refusals (a merge that brings files that
// run later says so and asks first).
import { call, el, button } from "/rpc.js";

const $ = (id) => document.getElementById(id);

function diffView(text) {
  const pre = el("pre", undefined, "diff");
  for (const line of String(text).split("\n")) {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del"
      : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("span", `${line}\n`, cls));
  }
  return pre;
}

function say(text) { $("git-out").replaceChildren(el("div", text, "meta")); }

async function show(view) {
  try { $("git-out").replaceChildren(await view()); } catch (e) { say(String(e.message || e)); }
}

/** Draws session `session`'s git panel in `#git`, if it is a git session. */
export async function showGit(session, info) {
  const box = $("git-box");
  box.hidden = !(info && info.git);
  if (box.hidden) return;
  const log = await call("git.log", { session, limit: 50 }).catch(() => null);
  const commit = (c, cls) => {
    const li = el("li", undefined, cls);
    // A checkpoint's turn trailer is `<turn>~<reason>-<approval>`.
    const checkpoint = (c.turn || "").includes("~");
    li.append(el("div", `${c.id.slice(0, 10)} ${c.summary}`, checkpoint ? "meta" : "state"));
    li.append(el("div", `${checkpoint ? "checkpoint · " : ""}${new Date(c.time * 1000).toLocaleString()} · ${c.files.length} file(s)`, "meta"));
    li.append(button("Diff", () => show(async () => diffView((await call("git.show", { commit: c.id, cwd: info.git.worktree })).diff))));
    return li;
  };
  // The branch as a line of commits, newest on top; the tips it left
  // (undo, checkout, reword, rebase) beside it.
  const list = el("ul", undefined, "graph");
  for (const c of (log && log.commits) || []) list.append(commit(c, ""));
  const kept = el("ul", undefined, "graph kept");
  for (const k of (log && log.kept) || []) {
    const li = commit(k.commit, "");
    li.prepend(el("div", `${k.name}: left by a move of the branch`, "meta"));
    kept.append(li);
  }
  const ops = el("div");
  ops.append(
    button("Diff of this turn", () => show(async () => diffView((await call("git.diff", { session, turn: true })).diff || "(nothing changed yet)"))),
    button("What a merge brings", () => show(async () => {
      const d = await call("git.diff", { session });
      const box = el("div");
      for (const m of d.marked || []) box.append(el("div", `! ${m.path}: ${m.why}${m.detail ? ` (${m.detail})` : ""}`, "meta"));
      box.append(diffView(d.diff));
      return box;
    })),
    button("Merge…", () => merge(session)),
    button("Rebase", () => show(async () => {
      const r = await call("git.rebase", { session });
      return el("div", r.commit ? `rebased: ${r.branch} is now at ${r.commit.slice(0, 10)}` : "nothing to rebase", "state");
    })),
    button("Reword…", () => reword(session, log && log.commits[0], () => showGit(session, info))),
  );
  const parts = [el("div", `branch ${log ? log.branch : info.git.branch}`, "meta"), ops, list];
  if (kept.children.length) parts.push(el("div", "Kept tips", "state"), kept);
  $("git").replaceChildren(...parts);
}

/** The last commit's message, edited (its trailers kept by the daemon). */
function reword(session, last, after) {
  const out = $("git-out");
  if (!last) { say("no commit to reword yet"); return; }
  const text = el("textarea");
  text.rows = 3;
  text.value = last.message.split(/\n\n(?=Forge-)/)[0];
  text.setAttribute("aria-label", "the last commit's message");
  out.replaceChildren(el("div", `Reword ${last.id.slice(0, 10)}`, "state"), text,
    button("Save", async () => {
      try {
        const r = await call("git.reword", { session, message: text.value });
        out.replaceChildren(el("div", `reworded: ${r.branch} is now at ${(r.commit || "").slice(0, 10)}; the old tip kept as ${r.kept || "a prev tip"}`, "state"));
        after();
      } catch (e) { out.append(el("div", String(e.message || e), "meta")); }
    }), button("Keep", () => out.replaceChildren()));
}

async function merge(session) {
  const out = $("git-out");
  out.replaceChildren();
  try {
    const dry = await call("git.merge", { session, dry_run: true });
    const marked = dry.marked || [];
    out.append(el("div", `A merge would bring ${dry.files.length} file(s) into ${dry.into}`, "state"));
    for (const m of marked) out.append(el("div", `! ${m.path}: ${m.why}${m.detail ? ` (${m.detail})` : ""}`, "meta"));
    out.append(button(marked.length ? "Merge, taking the marked files" : "Merge", async () => {
      try {
        const done = await call("git.merge", { session, accept_marked: marked.length > 0 });
        out.replaceChildren(el("div", `Merged (${done.how}) into ${done.into}: ${done.files.length} file(s)`, "state"));
      } catch (e) { out.append(el("div", String(e.message || e), "meta")); }
    }), button("Keep", () => out.replaceChildren()));
  } catch (e) {
    out.append(el("div", String(e.message || e), "meta"));
  }
}
