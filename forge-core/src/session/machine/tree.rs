//! Tree commands: checkout, edit (in place or as a new branch), bookmarks,
//! delete and split. Each is handled with the session's tree just read
//! (`Effect::ReadTree`), only while no turn runs, and journaled like any
//! other change: the ops, then an event every client sees.

use forge_proto::params::BookmarkParams;
use forge_proto::{ClientRef, ErrorKind, EventKind, MessageStatus, Role};

use forge_proto::methods::SessionRequest;

use super::history::chat_message;
use super::rewind::RewindArgs;
use super::state::OperationState;
use super::{Effect, ReadyReply, Session};
use crate::error::EngineError;
use crate::forest::Forest;
use crate::journal::StoreOp;
use crate::provider::ChatMessage;
use crate::session::SessionCmd;
use crate::store::rows::NodeMeta;

/// Longest bookmark name.
const MAX_BOOKMARK_LEN: usize = 64;

fn invalid(message: impl Into<String>) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}

impl Session {
    /// A tree command, with the tree as the store has it now.
    pub(super) fn on_tree_read(&mut self, forest: Result<Box<Forest>, EngineError>, cmd: SessionCmd) {
        let (mut request, client, reply) = match cmd {
            SessionCmd::Request { request, client, reply } => (request, client, reply),
            SessionCmd::Fork { mut params, client, reply } => {
                let Some(reply) = self.admit(reply, super::commands::Access::Write) else { return };
                let forest = forest.and_then(|f| match params.node.as_mut() {
                    Some(node) => f.resolve(&self.row.id, node).map(|id| *node = id).map(|()| f).map_err(Into::into),
                    None => Ok(f),
                });
                return match forest {
                    Ok(f) => self.on_fork(&f, params, client, reply),
                    Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
                };
            }
            other => return self.on_command(other),
        };
        let forest = forest.and_then(|f| self.resolve_node(&f, &mut request).map(|()| f));
        // Refused while a turn runs (a dry run of a rewind aside, which
        // its handler judges).
        let busy =
            (!matches!(self.state, OperationState::Idle)).then(|| self.busy("wait for it to end (or cancel it) first"));
        macro_rules! run {
            ($reply:expr, $body:expr) => {{
                let result = match (&forest, busy) {
                    (Err(e), _) => Err(e.clone()),
                    (Ok(_), Some(e)) => Err(e),
                    (Ok(f), None) => $body(self, f),
                };
                self.reply_when_durable($reply, result);
            }};
        }
        match request {
            SessionRequest::Checkout(params) => {
                let reply = reply.typed();
                match (&forest, busy) {
                    (Err(e), _) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e.clone())))),
                    (Ok(_), Some(e)) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
                    (Ok(f), None) if self.row.git.is_some() => self.git_checkout(f, params.node, client, reply),
                    (Ok(f), None) => match self.checkout(f, &params.node, client) {
                        Ok(()) => self.pipeline.effect(super::OnDurable::Info(reply, None)),
                        Err(e) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
                    },
                }
            }
            SessionRequest::Edit(params) => {
                run!(reply.typed(), |s: &mut Session, f: &Forest| s.edit(f, &params.node, params.text, client))
            }
            SessionRequest::Bookmark(params) => {
                let BookmarkParams { name, node, delete, .. } = params;
                run!(reply.typed(), |s: &mut Session, f: &Forest| s.bookmark(f, name, node, delete, client))
            }
            SessionRequest::DeleteNode(params) => {
                let cascade = params.cascade.unwrap_or(true);
                run!(reply.typed(), |s: &mut Session, f: &Forest| s.delete_node(f, &params.node, cascade, client))
            }
            SessionRequest::Split(params) => {
                run!(reply.typed(), |s: &mut Session, f: &Forest| s.split(f, &params.node, params.at, client))
            }
            SessionRequest::Rewind(params) => match (&forest, RewindArgs::new(params, client)) {
                (Ok(f), Ok(args)) => self.on_rewind(f, args, reply.typed()),
                (Err(e), _) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e.clone())))),
                (_, Err(e)) => self.out.push(Effect::Reply(ReadyReply::now(reply, Err(e)))),
            },
            request => self.on_request(request, client, reply),
        }
    }

    /// The node a tree command names, read once, here: by id, bookmark or
    /// unique id prefix (`Forest::resolve`); the params then hold its id.
    fn resolve_node(&self, forest: &Forest, request: &mut SessionRequest) -> Result<(), EngineError> {
        let node = match request {
            SessionRequest::Checkout(p) => Some(&mut p.node),
            SessionRequest::Edit(p) => Some(&mut p.node),
            SessionRequest::DeleteNode(p) => Some(&mut p.node),
            SessionRequest::Split(p) => Some(&mut p.node),
            SessionRequest::Rewind(p) => p.node.as_mut(),
            // A bookmark deleted needs no node.
            SessionRequest::Bookmark(p) if !p.delete => p.node.as_mut(),
            _ => None,
        };
        if let Some(node) = node {
            *node = forest.resolve(&self.row.id, node)?;
        }
        Ok(())
    }

    /// A node of this session's tree that a conversation can stand on
    /// (not a summary, which hangs beside the path).
    pub(super) fn conversation_node<'f>(
        &self,
        forest: &'f Forest,
        node: &str,
    ) -> Result<&'f crate::store::NodeRow, EngineError> {
        let n = forest.get(node)?;
        if n.role == Role::Summary {
            return Err(invalid(format!(
                "`{node}` is a summary, beside the conversation; pick the message it follows (`forgectl tree {}`)",
                self.row.id
            )));
        }
        Ok(n)
    }

    /// Points the session at `head` (none: an empty conversation), with
    /// `path` the conversation up to it.
    pub(super) fn move_head(&mut self, head: Option<String>, path: Vec<ChatMessage>, client: &ClientRef) {
        let previous = self.row.head_id.clone();
        self.row.head_id = head.clone();
        self.path = path;
        self.history = super::History::Held { release_armed: false };
        // Another path: the last request's count and a restore's choice
        // were about the old one.
        self.anchor = None;
        self.in_force = None;
        self.pipeline.op(StoreOp::SetHead { session_id: self.row.id.clone(), head_id: head.clone() });
        if head != previous {
            self.pipeline.event(Some(client.clone()), EventKind::HeadMoved { head, previous });
        }
    }

    /// The conversation on the path to `node`, as the tree has it.
    pub(super) fn path_to(forest: &Forest, node: Option<&str>) -> Result<Vec<ChatMessage>, EngineError> {
        match node {
            None => Ok(Vec::new()),
            Some(id) => Ok(forest.path(id)?.into_iter().filter_map(chat_message).collect()),
        }
    }

    fn checkout(&mut self, forest: &Forest, node: &str, client: ClientRef) -> Result<(), EngineError> {
        self.conversation_node(forest, node)?;
        let path = Self::path_to(forest, Some(node))?;
        self.move_head(Some(node.to_string()), path, &client);
        Ok(())
    }

    fn edit(
        &mut self,
        forest: &Forest,
        node: &str,
        text: String,
        client: ClientRef,
    ) -> Result<forge_proto::EditResult, EngineError> {
        let n = self.conversation_node(forest, node)?.clone();
        if !matches!(n.role, Role::User | Role::Assistant) {
            return Err(invalid("only user and assistant messages can be edited"));
        }
        if text.trim().is_empty() {
            return Err(invalid("the new text is empty"));
        }
        let answering = n.role == Role::User;
        if answering {
            self.provider_settings().and_then(|s| s.check_ready().map_err(EngineError::from))?;
        }
        let in_place = forest.children(Some(node)).is_empty();
        let new_id = if in_place {
            self.pipeline.op(StoreOp::UpdateNodeText { id: n.id.clone(), text: text.clone() });
            let mut path = Self::path_to(forest, Some(node))?;
            if let Some(last) = path.last_mut() {
                last.text = text.clone();
            }
            self.pipeline.event(
                Some(client.clone()),
                EventKind::NodeEdited { node_id: n.id.clone(), new_node_id: n.id.clone(), in_place: true },
            );
            self.move_head(Some(n.id.clone()), path, &client);
            n.id.clone()
        } else {
            let id = self.clock.new_id("m");
            // An edited answer is text only: its tool calls and what the
            // provider signed belong to the original.
            let meta = match n.role {
                // An edited root keeps the system prompt it was sent under.
                Role::User => NodeMeta {
                    message: forge_proto::MessageMeta { client: Some(client.clone()), ..Default::default() },
                    system_prompt: n.meta.system_prompt.clone(),
                    ..Default::default()
                },
                _ => NodeMeta {
                    message: forge_proto::MessageMeta {
                        provider: n.meta.message.provider.clone(),
                        model: n.meta.message.model.clone(),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            };
            self.pipeline.op(StoreOp::InsertNode {
                id: id.clone(),
                session_id: self.row.id.clone(),
                parent_id: n.parent_id.clone(),
                role: n.role,
                text: text.clone(),
                status: MessageStatus::Complete,
                created_ms: self.clock.now_ms(),
                meta,
            });
            self.pipeline.op(StoreOp::MoveBookmarks {
                session_id: self.row.id.clone(),
                from: n.id.clone(),
                to: id.clone(),
            });
            let mut path = Self::path_to(forest, n.parent_id.as_deref())?;
            let message = match n.role {
                Role::User => ChatMessage::user(text.clone()),
                _ => ChatMessage::assistant(text.clone(), Vec::new()),
            };
            path.push(message.with_node(id.clone()));
            self.pipeline.event(
                Some(client.clone()),
                EventKind::NodeEdited { node_id: n.id.clone(), new_node_id: id.clone(), in_place: false },
            );
            self.move_head(Some(id.clone()), path, &client);
            id
        };
        if answering {
            self.begin_turn(new_id.clone(), text, client, false);
        }
        Ok(forge_proto::EditResult {
            session_id: self.row.id.clone(),
            node_id: n.id,
            new_node_id: new_id,
            in_place,
            answering,
        })
    }

    fn bookmark(
        &mut self,
        forest: &Forest,
        name: String,
        node: Option<String>,
        delete: bool,
        client: ClientRef,
    ) -> Result<forge_proto::BookmarkResult, EngineError> {
        if !crate::ids::is_valid_name(&name, MAX_BOOKMARK_LEN) {
            return Err(invalid(format!(
                "\"{name}\" is not a valid bookmark name: use up to {MAX_BOOKMARK_LEN} letters, digits, '-', '_' or '.', not starting with '-'"
            )));
        }
        let node_id = if delete {
            self.pipeline.op(StoreOp::DeleteBookmark { session_id: self.row.id.clone(), name: name.clone() });
            None
        } else {
            let node = node.or_else(|| self.row.head_id.clone()).ok_or_else(|| {
                invalid("the conversation is empty: give the node to bookmark (`forgectl tree SESSION` lists them)")
            })?;
            self.conversation_node(forest, &node)?;
            self.pipeline.op(StoreOp::SetBookmark {
                session_id: self.row.id.clone(),
                name: name.clone(),
                node_id: node.clone(),
                created_ms: self.clock.now_ms(),
            });
            Some(node)
        };
        self.pipeline.event(Some(client), EventKind::BookmarkSet { name: name.clone(), node_id: node_id.clone() });
        Ok(forge_proto::BookmarkResult { session_id: self.row.id.clone(), name, node_id })
    }

    fn delete_node(
        &mut self,
        forest: &Forest,
        node: &str,
        cascade: bool,
        client: ClientRef,
    ) -> Result<forge_proto::DeleteNodeResult, EngineError> {
        let n = forest.get(node)?.clone();
        let mut gone: Vec<&crate::store::NodeRow> = vec![forest.get(node)?];
        if cascade {
            gone.extend(forest.descendants(node));
        }
        if let Some(other) = gone.iter().find(|g| g.session_id != self.row.id) {
            return Err(invalid(format!(
                "`{}` belongs to session {}, which this one was forked from: delete it there",
                other.id, other.session_id
            )));
        }
        let ids: Vec<String> = gone.iter().map(|g| g.id.clone()).collect();
        if !cascade {
            self.pipeline.op(StoreOp::ReparentChildren { of: n.id.clone(), to: n.parent_id.clone() });
        }
        self.pipeline.op(StoreOp::DeleteNodes { ids: ids.clone() });
        self.pipeline.event(Some(client.clone()), EventKind::NodesDeleted { node_ids: ids.clone(), cascade });
        self.summaries.retain(|s| !ids.contains(&s.id));
        // The head goes up to the deleted node's parent if it was deleted;
        // the path loses the node either way.
        let head = match &self.row.head_id {
            Some(h) if ids.contains(h) => n.parent_id.clone(),
            other => other.clone(),
        };
        let path: Vec<ChatMessage> = match head.as_deref() {
            None => Vec::new(),
            Some(h) => forest.path(h)?.into_iter().filter(|m| m.id != n.id).filter_map(chat_message).collect(),
        };
        self.move_head(head.clone(), path, &client);
        Ok(forge_proto::DeleteNodeResult { session_id: self.row.id.clone(), deleted: ids, head })
    }

    fn split(
        &mut self,
        forest: &Forest,
        node: &str,
        at: u64,
        client: ClientRef,
    ) -> Result<forge_proto::SplitResult, EngineError> {
        let n = self.conversation_node(forest, node)?.clone();
        if !matches!(n.role, Role::User | Role::Assistant) || !n.meta.message.tool_calls.is_empty() {
            return Err(invalid("only a user message or an answer without tool calls can be split"));
        }
        let chars = n.text.chars().count() as u64;
        if at == 0 || at >= chars {
            return Err(invalid(format!("split inside the message: `at` from 1 to {}", chars.saturating_sub(1))));
        }
        let cut = n.text.char_indices().nth(at as usize).map(|(i, _)| i).unwrap_or(n.text.len());
        let (head_text, tail_text) = (n.text[..cut].to_string(), n.text[cut..].to_string());
        if n.session_id != self.row.id {
            return Err(invalid(format!(
                "`{node}` belongs to session {}, which this one was forked from: split it there",
                n.session_id
            )));
        }
        let id = self.clock.new_id("m");
        self.pipeline.op(StoreOp::UpdateNodeText { id: n.id.clone(), text: head_text.clone() });
        self.pipeline.op(StoreOp::ReparentChildren { of: n.id.clone(), to: Some(id.clone()) });
        self.pipeline.op(StoreOp::InsertNode {
            id: id.clone(),
            session_id: self.row.id.clone(),
            parent_id: Some(n.id.clone()),
            role: n.role,
            text: tail_text.clone(),
            status: n.status,
            created_ms: self.clock.now_ms(),
            meta: NodeMeta {
                message: forge_proto::MessageMeta {
                    client: n.meta.message.client.clone(),
                    provider: n.meta.message.provider.clone(),
                    model: n.meta.message.model.clone(),
                    ..Default::default()
                },
                ..Default::default()
            },
        });
        self.pipeline
            .event(Some(client.clone()), EventKind::NodeSplit { node_id: n.id.clone(), new_node_id: id.clone(), at });
        // On the path, the message is now two.
        if let Some(k) = self.path.iter().position(|m| m.node.as_deref() == Some(n.id.as_str())) {
            let mut first = self.path[k].clone();
            first.text = head_text;
            let mut second = first.clone().with_node(id.clone());
            second.text = tail_text;
            second.reasoning.clear();
            self.path.splice(k..=k, [first, second]);
            let head = if self.row.head_id.as_deref() == Some(n.id.as_str()) {
                Some(id.clone())
            } else {
                self.row.head_id.clone()
            };
            let path = std::mem::take(&mut self.path);
            self.move_head(head, path, &client);
        }
        Ok(forge_proto::SplitResult { session_id: self.row.id.clone(), node_id: n.id, new_node_id: id })
    }
}
