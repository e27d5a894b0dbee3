//! Commands typed after `:` or `/`. Parsing never fails: what is not
//! understood becomes `Unknown` or `Invalid`, answered with a notification.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    Clear,
    Cancel,
    Model(Option<String>),
    Provider(Option<String>),
    /// The session's own temperature (or top_p): a number, or `default`.
    Sampling {
        top_p: bool,
        value: String,
    },
    Context,
    /// `/context add|remove PATH...`: the session's active files.
    ContextFiles {
        add: bool,
        paths: Vec<String>,
    },
    Journal,
    Summarize,
    Screen,
    Tool {
        id: String,
        result: String,
        is_error: bool,
    },
    Tools,
    Help,
    Approve(ApprovalChoice),
    Deny,
    Recover {
        resume: bool,
    },
    /// The conversation tree, drawn.
    Tree,
    /// Rewind the last turn, files included (`yes`: even if some cannot
    /// be restored).
    Undo {
        yes: bool,
    },
    /// Back to a node, files included (none: pick a turn from a list).
    Rewind {
        node: Option<String>,
        yes: bool,
    },
    /// Move to a node; with `files`, its files too.
    Checkout {
        node: String,
        files: bool,
    },
    /// A new session sharing the path up to a node (the head by default).
    Fork(Option<String>),
    /// Attach an image to the next message (none: list; `clear`: drop).
    Image(Option<String>),
    /// A known command with arguments it cannot use; says how to use it.
    Invalid {
        usage: &'static str,
    },
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalChoice {
    All,
    /// 1-based positions in the approval panel.
    Selected(Vec<u32>),
}

/// One line per command, for `/help` and the README.
pub const HELP: &[(&str, &str)] = &[
    ("/quit, /q", "leave the TUI (the session keeps running in forged)"),
    ("/cancel", "stop the running turn (the partial answer is kept)"),
    ("/clear", "start a fresh conversation in this session"),
    ("/model [name]", "switch model, or pick one from a list"),
    ("/provider [name], /p", "switch provider (claude, openai, gemini)"),
    ("/temperature T, /top_p P", "the session's own sampling (`default`: config.toml's again, both)"),
    ("/context, /ctx", "how much of the context window is used"),
    ("/context add|remove PATH...", "keep files' whole text in every request (the session's active files)"),
    ("/journal, /jrnl", "journal health and statistics"),
    ("/summarize, /sum", "summarize older messages to free context"),
    ("/screen", "switch between full-screen and inline display"),
    ("/tool ID RESULT", "answer a tool call in parse-only mode"),
    ("/tool error ID MESSAGE", "answer a tool call with an error"),
    ("/tools", "list the tools the model can use"),
    ("/approve [N...]", "approve all pending tool calls, or only calls N..."),
    ("/deny", "deny the pending tool calls"),
    ("/recover resume|discard", "after a crash during tools: resume or drop them"),
    (
        "/tree",
        "the tree view: j/k, h/l (parent/reply), [ ] (siblings) move; Enter checks out, f with its files, F forks there",
    ),
    ("/undo", "undo the last turn: its file changes, and the conversation"),
    ("/rewind [NODE]", "back to NODE (id, prefix or bookmark), files included; alone: pick a turn"),
    ("/checkout NODE [files]", "move to NODE; with `files`, its files follow"),
    ("/fork [NODE]", "a new session sharing the conversation up to NODE"),
    ("K / J (Normal)", "select the previous / next message"),
    ("[ / ] (Normal)", "show the previous / next version of the message (its siblings, \"2/3\")"),
    ("e (Normal)", "edit the selected (or last) message of yours: Enter sends it as a new branch"),
    (
        "/image PATH",
        "attach an image to your next message (or paste an image file's path; /image paste or Ctrl+V: the clipboard's image); /image lists, /image clear drops",
    ),
    ("/NAME [args]", "a command of one's own, or an MCP prompt (/server:prompt); Tab completes the name"),
    ("@server:uri (Insert)", "attach an MCP server's resource to the message; Tab completes it"),
    ("/help", "this list"),
];

impl Command {
    pub fn parse(raw: &str) -> Command {
        let raw = raw.trim().trim_start_matches(['/', ':']);
        let (name, rest) = match raw.split_once(char::is_whitespace) {
            Some((n, r)) => (n, r.trim()),
            None => (raw, ""),
        };
        let arg = (!rest.is_empty()).then(|| rest.to_string());
        let no_args = |c: Command| if rest.is_empty() { c } else { Command::Invalid { usage: usage_of(name) } };
        match name {
            "q" | "quit" => no_args(Command::Quit),
            "clear" => no_args(Command::Clear),
            "cancel" => no_args(Command::Cancel),
            "model" => Command::Model(arg),
            "p" | "provider" => Command::Provider(arg),
            "temperature" | "temp" | "top_p" => match rest.split_whitespace().count() {
                1 => Command::Sampling { top_p: name == "top_p", value: rest.to_string() },
                _ => Command::Invalid { usage: usage_of(name) },
            },
            "ctx" | "context" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [] => Command::Context,
                [op @ ("add" | "remove" | "rm"), paths @ ..] if !paths.is_empty() => {
                    Command::ContextFiles { add: *op == "add", paths: paths.iter().map(|p| p.to_string()).collect() }
                }
                _ => Command::Invalid { usage: usage_of(name) },
            },
            "jrnl" | "journal" => no_args(Command::Journal),
            "sum" | "summarize" => no_args(Command::Summarize),
            "screen" => no_args(Command::Screen),
            "tools" => no_args(Command::Tools),
            "help" | "h" | "?" => Command::Help,
            "deny" => no_args(Command::Deny),
            "tree" => no_args(Command::Tree),
            "undo" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [] => Command::Undo { yes: false },
                ["--yes" | "-y"] => Command::Undo { yes: true },
                _ => Command::Invalid { usage: usage_of("undo") },
            },
            "rewind" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [] => Command::Rewind { node: None, yes: false },
                [node] => Command::Rewind { node: Some(node.to_string()), yes: false },
                [node, "--yes" | "-y"] => Command::Rewind { node: Some(node.to_string()), yes: true },
                _ => Command::Invalid { usage: usage_of("rewind") },
            },
            "checkout" | "co" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [node] => Command::Checkout { node: node.to_string(), files: false },
                [node, "files"] => Command::Checkout { node: node.to_string(), files: true },
                _ => Command::Invalid { usage: usage_of("checkout") },
            },
            "fork" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
                [] => Command::Fork(None),
                [node] => Command::Fork(Some(node.to_string())),
                _ => Command::Invalid { usage: usage_of("fork") },
            },
            "tool" => parse_tool(rest),
            "image" | "img" => Command::Image(arg),
            "approve" => {
                if rest.is_empty() || rest == "all" {
                    return Command::Approve(ApprovalChoice::All);
                }
                let picked: Option<Vec<u32>> =
                    rest.split_whitespace().map(|n| n.parse().ok().filter(|n| *n > 0)).collect();
                match picked {
                    Some(p) => Command::Approve(ApprovalChoice::Selected(p)),
                    None => Command::Invalid { usage: usage_of("approve") },
                }
            }
            "recover" => match rest {
                "resume" => Command::Recover { resume: true },
                "discard" => Command::Recover { resume: false },
                _ => Command::Invalid { usage: usage_of("recover") },
            },
            _ => Command::Unknown(name.to_string()),
        }
    }
}

fn parse_tool(rest: &str) -> Command {
    let (is_error, rest) = match rest.strip_prefix("error") {
        Some(r) if r.starts_with(char::is_whitespace) => (true, r.trim_start()),
        _ => (false, rest),
    };
    match rest.split_once(char::is_whitespace) {
        Some((id, result)) if !result.trim().is_empty() => {
            Command::Tool { id: id.to_string(), result: result.trim().to_string(), is_error }
        }
        _ => Command::Invalid { usage: usage_of("tool") },
    }
}

/// What `/temperature VALUE` (or `/top_p`) asks of the session, or how to
/// use it.
pub fn sampling_params(top_p: bool, value: &str) -> Result<forge_proto::params::ConfigureParams, &'static str> {
    let mut params = forge_proto::params::ConfigureParams::default();
    if value == "default" {
        params.reset_sampling = true;
        return Ok(params);
    }
    let v: f64 = value.parse().map_err(|_| usage_of(if top_p { "top_p" } else { "temperature" }))?;
    match top_p {
        true => params.sampling.top_p = Some(v),
        false => params.sampling.temperature = Some(v),
    }
    Ok(params)
}

fn usage_of(name: &str) -> &'static str {
    match name {
        "tool" => "/tool ID RESULT  or  /tool error ID MESSAGE",
        "temperature" | "temp" => "/temperature T (0 to 2)  or  /temperature default",
        "top_p" => "/top_p P (0 to 1)  or  /top_p default",
        "approve" => "/approve  or  /approve N [N...] (numbers from the approval panel)",
        "recover" => "/recover resume  or  /recover discard",
        "q" | "quit" => "/quit",
        "clear" => "/clear",
        "cancel" => "/cancel",
        "ctx" | "context" => "/context  or  /context add PATH...  or  /context remove PATH...",
        "jrnl" | "journal" => "/journal",
        "sum" | "summarize" => "/summarize",
        "screen" => "/screen",
        "tools" => "/tools",
        "deny" => "/deny",
        "tree" => "/tree",
        "undo" => "/undo [--yes]",
        "rewind" => "/rewind NODE [--yes]",
        "checkout" | "co" => "/checkout NODE  or  /checkout NODE files",
        "fork" => "/fork  or  /fork NODE",
        _ => "/help lists the commands",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_aliases_parse_with_either_prefix() {
        assert_eq!(Command::parse("q"), Command::Quit);
        assert_eq!(Command::parse(":quit"), Command::Quit);
        assert_eq!(Command::parse("/ctx"), Command::Context);
        assert_eq!(Command::parse("jrnl"), Command::Journal);
        assert_eq!(Command::parse("model"), Command::Model(None));
        let t = |raw: &str| match Command::parse(raw) {
            Command::Sampling { top_p, value } => sampling_params(top_p, &value).ok(),
            _ => None,
        };
        assert_eq!(t("/temperature 0.3").map(|p| p.sampling.temperature), Some(Some(0.3)));
        assert_eq!(t("/top_p 0.9").map(|p| p.sampling.top_p), Some(Some(0.9)));
        assert!(t("/temperature default").is_some_and(|p| p.reset_sampling && p.sampling.is_empty()));
        assert_eq!(t("/temperature warm"), None);
        assert!(matches!(Command::parse("/temperature"), Command::Invalid { .. }));
        assert_eq!(Command::parse("model claude-opus-4-5"), Command::Model(Some("claude-opus-4-5".into())));
        assert_eq!(Command::parse("p openai"), Command::Provider(Some("openai".into())));
        assert_eq!(Command::parse("approve 1 3"), Command::Approve(ApprovalChoice::Selected(vec![1, 3])));
        assert_eq!(Command::parse("approve"), Command::Approve(ApprovalChoice::All));
        assert_eq!(Command::parse("/checkout m06 files"), Command::Checkout { node: "m06".into(), files: true });
        assert_eq!(Command::parse("rewind start"), Command::Rewind { node: Some("start".into()), yes: false });
        assert_eq!(Command::parse("rewind"), Command::Rewind { node: None, yes: false });
        assert_eq!(Command::parse("undo --yes"), Command::Undo { yes: true });
        assert_eq!(Command::parse("rewind a1 -y"), Command::Rewind { node: Some("a1".into()), yes: true });
        assert!(matches!(Command::parse("rewind a b"), Command::Invalid { .. }));
    }

    #[test]
    fn tool_results_keep_their_spaces_and_errors_are_marked() {
        assert_eq!(
            Command::parse("tool call_1 deployed to  prod"),
            Command::Tool { id: "call_1".into(), result: "deployed to  prod".into(), is_error: false }
        );
        assert_eq!(
            Command::parse("tool error call_2 disk full"),
            Command::Tool { id: "call_2".into(), result: "disk full".into(), is_error: true }
        );
        assert!(matches!(Command::parse("tool call_1"), Command::Invalid { .. }));
    }

    #[test]
    fn nonsense_is_unknown_or_invalid_never_a_panic() {
        assert_eq!(Command::parse("frobnicate now"), Command::Unknown("frobnicate".into()));
        assert!(matches!(Command::parse("quit now"), Command::Invalid { usage: "/quit" }));
        assert!(matches!(Command::parse("approve x"), Command::Invalid { .. }));
        assert!(matches!(Command::parse("approve 0"), Command::Invalid { .. }));
        assert!(matches!(Command::parse("recover maybe"), Command::Invalid { .. }));
        for s in ["", "/", ":", "   ", "tool error", "model  ", "🦀"] {
            let _ = Command::parse(s);
        }
    }
}
