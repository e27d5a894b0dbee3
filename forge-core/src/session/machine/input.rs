//! A message's way in: `session.send`, and a `session.steer` with no turn
//! to join, pass through this one stage before the session takes them.
//! The session hands its shell one I/O job per message
//! (`Effect::PrepareInput`, carried out by `session/input_task.rs`),
//! which reads again what may have changed outside (instruction files,
//! tools, hooks), expands `/name args` by the precedence rule of
//! [`named`], reads the MCP resources the message names, keeps its images
//! and looks for the same message under the head (prefix reuse). The
//! session then takes the message as prepared. Messages are prepared one
//! at a time, in the order they came: a slow MCP prompt never lets a later
//! message overtake it.

use std::collections::VecDeque;

use forge_proto::params::SendParams;
use forge_proto::{ClientRef, ErrorKind, EventKind, ImageInfo, ImageInput, SendResult};

use super::commands::{Access, SendArgs};
use super::{Effect, ReadyReply, Refresh, Session, TurnGrants};
use crate::error::EngineError;
use crate::session::{Reply, SameMessage};
use crate::slash_commands::SlashCommand;

/// Messages waiting for the one being prepared (see `Inputs`).
const MAX_WAITING: usize = crate::session::COMMAND_QUEUE;

/// The most MCP resources one message may carry.
pub(crate) const MAX_RESOURCES: usize = 20;

/// What the shell is asked to read and write for one message.
pub(crate) struct InputJob {
    pub job: u64,
    pub session: String,
    pub cwd: String,
    /// The text as sent (`None` with `continue`).
    pub text: Option<String>,
    pub continued: bool,
    /// `server:uri` of each resource to read and add after the text.
    pub resources: Vec<String>,
    /// The images to keep (inline) or find (by hash).
    pub images: Vec<ImageInput>,
}

/// What the job found: what changed outside (`None`: the job failed
/// before it could tell), and the message as the session takes it.
pub(crate) struct Prepared {
    pub refresh: Option<Refresh>,
    pub input: Result<Input, EngineError>,
}

/// A message, expanded and completed.
#[derive(Default)]
pub(crate) struct Input {
    pub text: Option<String>,
    /// What the command of one's own it came from grants its turn.
    pub grants: TurnGrants,
    pub images: Vec<ImageInfo>,
    /// Identical user messages already under the head, as the store had
    /// them (see `accept_send`).
    pub same: Vec<SameMessage>,
    /// The project command the text would run were the folder trusted.
    pub ignored: Option<String>,
}

/// What `/word args` names. One rule for every message: a command of
/// one's own (the user's, a trusted project's) wins over an MCP prompt
/// of the same name, as one's own files do; text that names neither is
/// sent as it is.
#[derive(Debug, PartialEq)]
pub(crate) enum Named<'a> {
    Own { command: &'a SlashCommand, args: &'a str },
    Mcp { server: &'a str, prompt: &'a str, args: &'a str },
    Plain,
}

/// The precedence rule (see [`Named`]); `mcp_has` says whether a server
/// offers a prompt of that name.
pub(crate) fn named<'a>(text: &'a str, own: &'a [SlashCommand], mcp_has: impl Fn(&str, &str) -> bool) -> Named<'a> {
    let Some(rest) = text.trim_start().strip_prefix('/') else { return Named::Plain };
    let (word, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if let Some(command) = own.iter().find(|c| c.info.name == word) {
        return Named::Own { command, args };
    }
    match word.split_once(':') {
        Some((server, prompt)) if !server.is_empty() && !prompt.is_empty() && mcp_has(server, prompt) => {
            Named::Mcp { server, prompt, args }
        }
        _ => Named::Plain,
    }
}

/// The server a `/server:prompt` text names, whatever it offers (a
/// server still starting has listed no prompt yet).
pub(crate) fn prompt_server(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('/')?;
    let word = rest.split(char::is_whitespace).next()?;
    word.split_once(':').map(|(server, _)| server).filter(|s| !s.is_empty())
}

/// A message waiting for its turn to be prepared.
struct Waiting {
    params: SendParams,
    client: ClientRef,
    reply: Reply<SendResult>,
}

/// The messages on their way in.
#[derive(Default)]
pub(super) struct Inputs {
    /// The one being prepared, by its job.
    preparing: Option<(u64, Waiting)>,
    waiting: VecDeque<Waiting>,
    /// A project command ignored for trust was said (once a session).
    said_untrusted: bool,
}

impl Inputs {
    pub(super) fn is_idle(&self) -> bool {
        self.preparing.is_none() && self.waiting.is_empty()
    }
}

impl Session {
    /// A message for the session (`session.send`, an idle steer, a
    /// helper's task or its resumption): checked for what needs no I/O,
    /// then prepared after those before it.
    pub(super) fn on_input(&mut self, params: SendParams, client: ClientRef, reply: Reply<SendResult>) {
        let Some(reply) = self.admit(reply, Access::Write) else { return };
        let invalid = |m: String| Err(EngineError::new(ErrorKind::InvalidParams, m));
        let refused = if let Some(refused) = self.helper_cancelled_before_its_task() {
            Err(refused)
        } else if params.images.len() > crate::images::MAX_IMAGES {
            invalid(format!("{} images; a message carries at most {}", params.images.len(), crate::images::MAX_IMAGES))
        } else if params.resources.len() > MAX_RESOURCES {
            invalid(format!("{} resources given; a message carries at most {MAX_RESOURCES}", params.resources.len()))
        } else if self.inputs.waiting.len() >= MAX_WAITING {
            // As many as the session's command queue holds: past that, as
            // there, the sender retries.
            Err(EngineError::new(
                ErrorKind::Overloaded,
                "the session has too many messages on their way in; retry shortly",
            ))
        } else {
            Ok(())
        };
        if let Err(e) = refused {
            return self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e))));
        }
        self.inputs.waiting.push_back(Waiting { params, client, reply });
        self.prepare_next_input();
    }

    fn prepare_next_input(&mut self) {
        if self.inputs.preparing.is_some() {
            return;
        }
        let Some(mut next) = self.inputs.waiting.pop_front() else { return };
        let job = self.new_job();
        self.out.push(Effect::PrepareInput(Box::new(InputJob {
            job,
            session: self.row.id.clone(),
            cwd: self.row.cwd.clone(),
            text: next.params.text.take(),
            continued: next.params.continued,
            resources: std::mem::take(&mut next.params.resources),
            images: std::mem::take(&mut next.params.images),
        })));
        self.inputs.preparing = Some((job, next));
    }

    /// The job came back: the session takes in what changed outside, then
    /// the message, as it stands now.
    pub(super) fn on_input_prepared(&mut self, job: u64, prepared: Prepared) {
        // A job that is not the one awaited (there is none) is dropped.
        let Some((_, Waiting { params, client, reply })) = self.inputs.preparing.take_if(|(j, _)| *j == job) else {
            return;
        };
        let mut gone = None;
        if let Some(Refresh { prompt, tools, agents, hooks, starting, active, git_hooks }) = prepared.refresh {
            // Out of the request at once; said after the message's own
            // event, where a client following the turn sees it.
            gone = self.refresh_active_files(&active);
            if let Some((prompt, files)) = prompt {
                self.system_prompt = prompt;
                self.instruction_files = files;
            }
            if let Some(tools) = tools {
                self.set_tools(tools);
            }
            if let Some(agents) = agents {
                self.agents = agents;
            }
            self.hooks = hooks;
            self.git_hooks = git_hooks;
            self.set_mcp_starting(starting);
        }
        match prepared.input {
            Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
            Ok(input) => self.take_input(params, client, reply, input),
        }
        if let Some(event) = gone {
            self.pipeline.event(None, event);
        }
        self.prepare_next_input();
    }

    fn take_input(&mut self, params: SendParams, client: ClientRef, reply: Reply<SendResult>, input: Input) {
        let Some(reply) = self.admit(reply, Access::Write) else { return };
        let Input { text, mut grants, images, same, ignored } = input;
        grants.sampling = params.sampling;
        let args = SendArgs {
            text: text.unwrap_or_default(),
            client,
            same,
            n: params.n.unwrap_or(1),
            continued: params.continued,
            output_schema: params.output_schema,
            grants,
            images,
        };
        self.on_send(args, reply);
        // Said once, after the message's own event: a client following
        // from there sees it.
        if let Some(name) = ignored
            && !std::mem::replace(&mut self.inputs.said_untrusted, true)
        {
            let dir = self.row.cwd.clone();
            self.pipeline.event(None, EventKind::CommandIgnored { name, dir });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ones_own_command_wins_over_an_mcp_prompt_of_the_same_name() {
        let own = vec![crate::slash_commands::parse("gh:review", "Review $ARGUMENTS", "user")];
        let offered = |server: &str, prompt: &str| (server, prompt) == ("gh", "review") || server == "docs";
        assert!(matches!(named("/gh:review 12", &own, offered), Named::Own { args: "12", .. }));
        assert_eq!(named("/docs:find x y", &own, offered), Named::Mcp { server: "docs", prompt: "find", args: "x y" });
        assert_eq!(named("/other:find", &own, offered), Named::Plain, "a prompt nobody offers");
        assert_eq!(named("/:x", &own, offered), Named::Plain);
        assert_eq!(named("gh:review", &own, offered), Named::Plain);
        assert_eq!(prompt_server("  /docs:find now"), Some("docs"));
        assert_eq!(prompt_server("/review"), None);
    }
}
