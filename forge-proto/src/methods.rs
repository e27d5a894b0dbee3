//! The JSON-RPC API, declared once: each method's wire name, params
//! struct, result and routing. From this table come the server trait and
//! its dispatch (`server` feature: [`ForgeServer`], [`into_module`]), the
//! client (`client` feature: [`ForgeClient`]) and the JSON Schema
//! ([`crate::schema`]). Method names read `<area>.<verb>`.
//!
//! Routing: `daemon` methods the daemon answers itself; `session` methods
//! name a session (their params struct is [`Addressed`]) and the daemon
//! works with that session; the `machine` block's methods are commands of
//! the session's state machine: each becomes a [`SessionRequest`] variant,
//! which the daemon hands, as the wire gave it, to the session its params
//! name, whose machine answers it.
//!
//! Adding a method is one line here (and its params struct in
//! [`crate::params`]). A `daemon` or `session` method then needs its
//! server method (the compiler asks for it); a `machine` method needs
//! nothing in the daemon, only its arm in the session machine.

use crate::active_files::ContextFilesResult;
use crate::calls::*;
use crate::commands::{CommandInfo, PlanInfo};
use crate::context::ContextInfo;
use crate::events::SessionEvent;
use crate::git::*;
use crate::history::HistoryResult;
use crate::images::{ImageData, ImageInfo, SessionFile};
use crate::params::*;
use crate::store::{StoreGcResult, StoreStatus};
use crate::trust::{FolderTrust, ProjectTools};
use crate::types::*;
use crate::usage::*;

/// What a method's routing says (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Session,
    Daemon,
    /// A command of the session's machine ([`SessionRequest`]).
    Machine,
}

/// One method as the table declares it.
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo {
    pub name: &'static str,
    pub route: Route,
    pub doc: &'static str,
}

impl MethodInfo {
    /// The doc comment as one paragraph.
    pub fn description(&self) -> String {
        self.doc.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// `session.subscribe`: replays stored events with `seq >= from_seq`
/// (default: none, live only), then live events, with no gap and no
/// duplicate, as `session.event` notifications. WebSocket only (the JSON
/// lines transport has its own follow).
pub const SUBSCRIBE: &str = "session.subscribe";
pub const NOTIFICATION: &str = "session.event";
pub const UNSUBSCRIBE: &str = "session.unsubscribe";

macro_rules! route {
    (session) => {
        Route::Session
    };
    (daemon) => {
        Route::Daemon
    };
}

/// A session method's params must name the session (checked when built).
macro_rules! addressed {
    (session, $params:ty) => {
        const _: fn() = || {
            fn named<T: Addressed>() {}
            named::<$params>();
        };
    };
    (daemon, $params:ty) => {};
}

macro_rules! forge_methods {
    (machine {$(
        $(#[doc = $mdoc:literal])*
        $mwire:literal $mfn:ident($mparams:ty) -> $mresult:ty = $variant:ident;
    )*}
    $(
        $(#[doc = $doc:literal])*
        $route:ident $wire:literal $fn:ident($params:ty) -> $result:ty;
    )*) => {
        /// Every method of the table, in its order.
        pub const METHODS: &[MethodInfo] = &[$(MethodInfo {
            name: $wire,
            route: route!($route),
            doc: concat!($($doc, "\n",)* ""),
        },)* $(MethodInfo {
            name: $mwire,
            route: Route::Machine,
            doc: concat!($($mdoc, "\n",)* ""),
        },)*];

        $(addressed!($route, $params);)*

        /// A command of a session's machine, with its params as the wire
        /// gave them (the `machine` block of the table).
        #[derive(Debug, Clone, PartialEq)]
        pub enum SessionRequest {
            $($(#[doc = $mdoc])* $variant($mparams),)*
        }

        impl SessionRequest {
            /// Its wire name.
            pub fn method(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $mwire,)*
                }
            }

            /// The session its params name, for the daemon to resolve.
            pub fn session_mut(&mut self) -> &mut String {
                match self {
                    $(Self::$variant(p) => &mut p.session,)*
                }
            }
        }

        impl Addressed for SessionRequest {
            fn session(&self) -> &str {
                match self {
                    $(Self::$variant(p) => p.session(),)*
                }
            }
        }

        /// Each method's params and result schema, by wire name.
        pub(crate) fn schemas(g: &mut schemars::SchemaGenerator) -> Vec<(&'static str, schemars::Schema, schemars::Schema)> {
            vec![$((
                $wire,
                <$params as schemars::JsonSchema>::json_schema(g),
                g.subschema_for::<$result>(),
            ),)* $((
                $mwire,
                <$mparams as schemars::JsonSchema>::json_schema(g),
                g.subschema_for::<$mresult>(),
            ),)*]
        }

        /// What `forged` implements: one method per table entry, each
        /// taking its params struct.
        #[cfg(feature = "server")]
        pub trait ForgeServer: Send + Sync + 'static {
            $(
                $(#[doc = $doc])*
                fn $fn(&self, params: $params) -> impl std::future::Future<Output = RpcResult<$result>> + Send;
            )*

            /// Every `machine` method: hand the request to the session its
            /// params name and return what its machine answered.
            fn session_request(
                &self,
                request: SessionRequest,
            ) -> impl std::future::Future<Output = RpcResult<serde_json::Value>> + Send;

            /// See [`SUBSCRIBE`].
            fn session_subscribe(
                &self,
                pending: jsonrpsee::PendingSubscriptionSink,
                params: SubscribeParams,
            ) -> impl std::future::Future<Output = jsonrpsee::core::SubscriptionResult> + Send;
        }

        /// The dispatch: every method of the table registered on one
        /// module, its params parsed into their struct.
        #[cfg(feature = "server")]
        pub fn into_module<S: ForgeServer>(server: S) -> Result<jsonrpsee::RpcModule<S>, jsonrpsee::core::RegisterMethodError> {
            let mut module = jsonrpsee::RpcModule::new(server);
            $(
                server::register(&mut module, $wire, |s: std::sync::Arc<S>, p: $params| async move { s.$fn(p).await })?;
            )*
            $(
                server::register(&mut module, $mwire, |s: std::sync::Arc<S>, p: $mparams| async move {
                    s.session_request(SessionRequest::$variant(p)).await
                })?;
            )*
            server::register_subscription(&mut module)?;
            Ok(module)
        }

        /// A client of the API: every method of the table on any
        /// jsonrpsee client. Params go as their struct (`impl Into`: a
        /// session id alone makes a [`SessionRef`]).
        #[cfg(feature = "client")]
        pub trait ForgeClient: jsonrpsee::core::client::ClientT + Sync {
            $(
                $(#[doc = $doc])*
                fn $fn(
                    &self,
                    params: impl Into<$params> + Send,
                ) -> impl std::future::Future<Output = Result<$result, jsonrpsee::core::client::Error>> + Send {
                    self.request($wire, client::ByName(params.into()))
                }
            )*
            $(
                $(#[doc = $mdoc])*
                fn $mfn(
                    &self,
                    params: impl Into<$mparams> + Send,
                ) -> impl std::future::Future<Output = Result<$mresult, jsonrpsee::core::client::Error>> + Send {
                    self.request($mwire, client::ByName(params.into()))
                }
            )*

            /// See [`SUBSCRIBE`].
            fn session_subscribe(
                &self,
                params: SubscribeParams,
            ) -> impl std::future::Future<
                Output = Result<jsonrpsee::core::client::Subscription<crate::SubscriptionItem>, jsonrpsee::core::client::Error>,
            > + Send
            where
                Self: jsonrpsee::core::client::SubscriptionClientT,
            {
                jsonrpsee::core::client::SubscriptionClientT::subscribe(self, SUBSCRIBE, client::ByName(params), UNSUBSCRIBE)
            }
        }

        #[cfg(feature = "client")]
        impl<C: jsonrpsee::core::client::ClientT + Sync> ForgeClient for C {}
    };
}

/// A method's answer, as the server gives it.
#[cfg(any(feature = "server", feature = "client"))]
pub type RpcResult<T> = Result<T, jsonrpsee::types::ErrorObjectOwned>;

forge_methods! {
    // The session machine's commands (see the module's documentation).
    machine {
        /// Answers a session's pending approval. The first valid answer wins;
        /// later ones get `approval_not_pending`. `approval_id`, when given,
        /// must match the pending one (so a stale answer cannot approve a
        /// newer request).
        "approval.answer" approval_answer(AnswerParams) -> ApprovalResult = Answer;
        /// A session's own approval rules: `mode` (`default`, `permissive`,
        /// `strict`; `""` drops it) replaces `[tools.approval] mode` for it;
        /// `allow` adds tools that run without asking in it (`clear` first
        /// forgets those allowed before). Without params: the rules as they are.
        "session.approval_rules" session_approval_rules(ApprovalRulesParams) -> ApprovalRules = ApprovalRules;
        /// Parse-only mode: the result of one tool call the model made. When
        /// every call of the answer has one, the model continues the turn.
        "session.tool_result" session_tool_result(ToolResultParams) -> ToolResultAccepted = ToolResult;
        /// Answers a session in `tool_recovery`: `resume` re-runs calls that
        /// never started and read-only ones, answers interrupted side-effecting
        /// calls with an error (never re-run behind the user's back), and
        /// continues the turn; `discard` answers all of them as discarded and
        /// ends the turn.
        "session.recover" session_recover(RecoverParams) -> RecoverResult = Recover;
        /// Summarizes the conversation up to its newest exchange now. Refused
        /// while a turn runs, or when there is nothing before the newest
        /// exchange.
        "session.summarize" session_summarize(SessionRef) -> SummarizeResult = Summarize;
        /// Steers the running turn: the text joins it at the next safe point
        /// (after the current tool batch's results, before the next request;
        /// never inside a streamed answer), journaled as its own user message;
        /// if the turn ends first it becomes the next message. With no turn
        /// running it is sent as a message at once (`started`).
        "session.steer" session_steer(SteerParams) -> SteerResult = Steer;
        /// Sends a user message. Starts a turn, or queues the message when one
        /// is running (the result says so). Answers once the message is
        /// persisted. `n` > 1 asks for that many sibling answers (tools off
        /// only); `continue` (no `text`) answers what the session holds now.
        "session.send" session_send(SendParams) -> SendResult = Send;
        /// Sets or clears (`name: null`) a session's name.
        "session.rename" session_rename(RenameParams) -> SessionInfo = Rename;
        /// Switches the session's provider and/or model for its next requests.
        /// A provider alone takes that provider's default model.
        "session.configure" session_configure(ConfigureParams) -> SessionInfo = Configure;
        /// Starts the conversation afresh (refused while a turn runs). Nothing
        /// is deleted: earlier messages stay in the store.
        "session.clear" session_clear(SessionRef) -> SessionInfo = Clear;
        /// How much of the model's context window the session's path uses;
        /// `system: true` adds the system prompt its requests carry; `span: N`
        /// the original messages the session's N-th summary stands for.
        "session.context" session_context(ContextParams) -> ContextInfo = Context;
        /// Rebases a git session's branch and worktree onto the user's
        /// current branch (refused while it runs a turn); a conflict changes
        /// nothing (`git_conflict`); the old tip is kept as `prev-N`.
        "git.rebase" git_rebase(SessionRef) -> GitRebased = GitRebase;
        /// Edits the message of the session branch's last commit (its
        /// trailers kept; refused while it runs a turn); the old commit is
        /// kept as `prev-N`. Answers as `git.rebase` does.
        "git.reword" git_reword(GitRewordParams) -> GitRebased = GitReword;
        /// Adds files to the session's active files (their whole text goes
        /// with every request) and removes others. A file that is binary,
        /// over the read limit, outside the session's roots or too large for
        /// the context budget is refused with the reason; the rest are done.
        "session.context_files" session_context_files(ContextFilesParams) -> ContextFilesResult = ContextFiles;
        /// Cancels the running turn; the partial answer is kept, marked
        /// cancelled. With `drop_queued`, queued messages are dropped too.
        "session.cancel" session_cancel(CancelParams) -> CancelResult = Cancel;
        /// Moves the session's head to a node of its tree (refused while a
        /// turn runs). Nothing is deleted: the branch left stays in the tree.
        "session.checkout" session_checkout(CheckoutParams) -> SessionInfo = Checkout;
        /// Puts the files tools changed after `node` back as they were there,
        /// and moves the head to it (the abandoned branch stays in the tree).
        /// Without `node`: the last turn (undo). `files_only` leaves the
        /// conversation, `conversation_only` the files; `dry_run` changes
        /// nothing and returns the diff; `force` overwrites files changed
        /// outside Forge since (otherwise `rewind_conflict`).
        "session.rewind" session_rewind(RewindParams) -> RewindResult = Rewind;
        /// Edits a message: in place when nothing replies to it, else as a new
        /// sibling branch (the original stays). The head moves to it, and an
        /// edited user message is answered.
        "session.edit" session_edit(EditParams) -> EditResult = Edit;
        /// Sets a bookmark on `node` (default: the head), or deletes it.
        "session.bookmark" session_bookmark(BookmarkParams) -> BookmarkResult = Bookmark;
        /// Deletes a node: with `cascade` (default) and everything under it,
        /// else its children hang from its parent instead.
        "session.delete_node" session_delete_node(DeleteNodeParams) -> DeleteNodeResult = DeleteNode;
        /// Cuts a message in two at character `at`.
        "session.split" session_split(SplitParams) -> SplitResult = Split;
    }

    /// Handshake: the client states the protocol version it speaks and who
    /// it is. Events caused by this connection carry that identity.
    daemon "hello" hello(HelloParams) -> HelloResult;

    /// A new session in `cwd`. A broad `cwd` (`/`, the home directory
    /// itself, a system directory) is refused (`broad_root`) unless
    /// `allow_broad_root`.
    daemon "session.create" session_create(CreateParams) -> SessionInfo;
    /// A git session's turns as commits, newest first (a resumed session
    /// goes on into the commits it came from).
    daemon "git.log" git_log(GitLogParams) -> GitLog;
    /// One commit of a git session: its turn, the session state it holds
    /// and its diff.
    daemon "git.show" git_show(GitShowParams) -> GitShown;
    /// What merging a git session's branch into the user's HEAD would
    /// bring, as a patch.
    daemon "git.diff" git_diff(GitDiffParams) -> GitDiff;
    /// Merges a git session's branch into the user's current branch: a
    /// fast-forward when possible (else a merge commit; `squash`: one
    /// commit), only when the user's tracked files hold no changes and the
    /// session runs no turn. A conflict changes nothing (`git_conflict`).
    daemon "git.merge" git_merge(GitMergeParams) -> GitMerged;
    /// Every session, newest activity first.
    daemon "session.list" session_list(NoParams) -> Vec<SessionInfo>;
    /// One session, with its usage.
    daemon "session.show" session_show(SessionRef) -> SessionInfo;
    /// The session's plan as the model last updated it (`update_plan`).
    daemon "session.plan" session_plan(SessionRef) -> PlanInfo;
    /// The commands of one's own a session has (the user's, and in a
    /// trusted folder the project's) and its MCP servers' prompts
    /// (`server:prompt`, source `mcp`): `/name args` sent to it becomes
    /// the command's prompt.
    daemon "commands.list" commands_list(SessionRef) -> Vec<CommandInfo>;
    /// Removes a session and its history. Refused while a turn runs.
    session "session.remove" session_remove(SessionRef) -> RemoveResult;
    /// Searches the facts kept from the session's summarized spans (what
    /// the model's `recall` tool searches); each hit cites its message.
    daemon "session.recall" session_recall(RecallParams) -> RecallResult;
    /// A whole session as JSON lines: the session, every node of its tree,
    /// bookmarks, Librarian facts and the event log (`forgectl export`).
    /// Long sessions come in pages: ask again from `next` until it is
    /// absent.
    daemon "session.export" session_export(ExportParams) -> ExportResult;
    /// A session exported elsewhere, with its ids (`forgectl import`);
    /// refused if this daemon has it, one of its nodes, or its name. Long
    /// exports go in pieces: `more: true` keeps them (under the `upload`
    /// the first answer names) until the last piece. `cwd` re-roots the
    /// session in another directory (given with the last piece).
    daemon "session.import" session_import(ImportParams) -> ImportResult;
    /// The models Forge knows (built in and from `[[models]]`), optionally
    /// of one provider.
    daemon "models.list" models_list(ModelsParams) -> Vec<ModelInfo>;
    /// Tokens and estimated cost per session, working directory and model;
    /// of one session, and from a time on (Unix ms), if given.
    daemon "usage.report" usage_report(UsageParams) -> UsageReport;
    /// The tools the model may call, with their risk and approval rule.
    daemon "tools.list" tools_list(NoParams) -> Vec<ToolInfo>;
    /// The MCP servers (config.toml's, and those editors gave sessions):
    /// state, last error, tools and calls made. With `session`, the ones
    /// that session sees.
    daemon "mcp.list" mcp_list(McpListParams) -> Vec<McpServerInfo>;
    /// Connects to an MCP server again now (a stdio server is stopped and
    /// started; a failed one's backoff is skipped).
    daemon "mcp.restart" mcp_restart(McpRestartParams) -> McpServerInfo;
    /// The resources the MCP servers list (those `session` sees, if
    /// given); `session.send {resources: ["server:uri"]}` attaches one.
    daemon "mcp.resources" mcp_resources(McpListParams) -> Vec<McpResourceInfo>;
    /// Keeps one image (checked: type, size, dimensions) for a message
    /// sent after; answers what `session.send {images: [{hash}]}` names.
    daemon "images.put" images_put(ImagePutParams) -> ImageInfo;
    /// The bytes of an image a message holds (by its hash), e.g. for an
    /// editor replaying a conversation; only images are given.
    daemon "images.get" images_get(ImageGetParams) -> ImageData;
    /// A text file in a session's directories, as its tools may read it
    /// (the sandbox's roots and deny patterns, no link followed), e.g. for
    /// a client showing the files a turn touched.
    daemon "session.file" session_file(SessionFileParams) -> SessionFile;
    /// Runs the escape suite against the command sandbox of the
    /// configuration in force: each probe is a command run as
    /// `run_command` runs one, trying a way out. Takes some seconds.
    daemon "sandbox.test" sandbox_test(NoParams) -> SandboxReport;
    /// The folders the user trusts, each with its state now (a trusted
    /// folder whose files changed is `changed`).
    daemon "trust.list" trust_list(NoParams) -> Vec<FolderTrust>;
    /// A folder's trust: what it provides that runs code (its Claude
    /// settings' hooks, `.mcp.json`'s servers) and whether Forge honours it.
    daemon "trust.show" trust_show(DirParams) -> FolderTrust;
    /// Trusts a folder as its files are now: its own hooks and MCP servers
    /// are honoured from the next session (or tool call) on.
    daemon "trust.add" trust_add(DirParams) -> FolderTrust;
    /// Stops trusting a folder.
    daemon "trust.revoke" trust_revoke(DirParams) -> FolderTrust;
    /// The project tools (`.forge/tools/*.toml`) of the project `dir` is
    /// in, each with its approval.
    daemon "tools.project" tools_project(DirParams) -> ProjectTools;
    /// Approves tool files as their content is now (the digests the client
    /// showed): from the next message on, sessions of that project offer
    /// them and run them confined without asking.
    daemon "tools.approve" tools_approve(ApproveToolsParams) -> ProjectTools;
    /// Ends tool files' approval (none named: all of the project's).
    daemon "tools.revoke" tools_revoke(RevokeToolsParams) -> ProjectTools;
    /// Every node of the session's tree (its own, and the path it shares
    /// with the session it was forked from), with the head and bookmarks.
    daemon "session.tree" session_tree(SessionRef) -> TreeInfo;
    /// The leaves of the session's tree: where each branch ends.
    daemon "session.branches" session_branches(SessionRef) -> Vec<BranchInfo>;
    /// A new session sharing this one's path up to `node` (default: the
    /// head), without copying it; with `restore_files`, the files tools
    /// changed after `node` are put back as they were there (`force`: even
    /// files changed outside Forge since).
    session "session.fork" session_fork(ForkParams) -> SessionInfo;
    /// The messages on the session's current history path, oldest first.
    daemon "session.history" session_history(SessionRef) -> HistoryResult;
    /// Stored events with `seq > after_seq` (default 0), at most `limit`
    /// (default and maximum 10000). For clients that poll over plain HTTP.
    daemon "session.events" session_events(EventsParams) -> Vec<SessionEvent>;
    /// Every pending approval across all sessions (one inbox).
    daemon "approval.list" approval_list(NoParams) -> Vec<PendingApproval>;
    /// Gives a session MCP servers of its own (an editor's), replacing any
    /// it had: their tools are offered in this session only. They run
    /// until the daemon stops.
    daemon "session.set_mcp_servers" session_set_mcp_servers(SetMcpServersParams) -> Vec<McpServerInfo>;
    /// The journal writer's health and statistics.
    daemon "journal.status" journal_status(NoParams) -> JournalStatus;
    /// After a store failure is fixed (disk space freed, permissions
    /// restored), proves the store writable and returns to healthy;
    /// sessions then recover what the failure interrupted. Fails, still
    /// blocked, with the reason if the store is still not writable.
    daemon "journal.reset" journal_reset(NoParams) -> JournalStatus;
    /// What the store weighs: the database, the blobs (rewind's file
    /// contents and images), per session, against `[store] max_blob_mb`.
    daemon "store.status" store_status(NoParams) -> StoreStatus;
    /// Collects the blobs no record needs (a removed session's, contents
    /// read of files no command changed), then evicts the oldest rewind
    /// content past `[store] max_blob_mb`.
    daemon "store.gc" store_gc(NoParams) -> StoreGcResult;
    /// The daemon's version, uptime, sessions, clients, journal and
    /// sandbox.
    daemon "daemon.status" daemon_status(NoParams) -> DaemonStatus;
    /// Stops the daemon gracefully: running turns are cancelled and the
    /// store is left consistent. Answers before stopping.
    daemon "daemon.shutdown" daemon_shutdown(NoParams) -> ();
    /// A one-time code that pairs a browser with the web client on a TCP
    /// listener, started (and remembered for restarts) if none runs (see
    /// docs/remote.md). Refused on a connection that came in through the
    /// web client itself.
    daemon "web.pair" web_pair(WebPairParams) -> crate::web::WebPairing;
    /// The browsers paired with the web client.
    daemon "web.devices" web_devices(NoParams) -> Vec<crate::web::WebDevice>;
    /// Signs a paired browser out (or every one), closing its connections.
    daemon "web.revoke" web_revoke(WebRevokeParams) -> Vec<String>;
    /// Texts (markdown, with `$…$` and `$$…$$` math) as inert HTML, one
    /// for each: raw HTML shown as text, links only to http(s) and
    /// mailto, images as links, math as MathML.
    daemon "web.render" web_render(WebRenderParams) -> Vec<String>;
}

#[cfg(feature = "server")]
mod server {
    use std::future::Future;
    use std::sync::Arc;

    use jsonrpsee::RpcModule;
    use jsonrpsee::core::RegisterMethodError;
    use jsonrpsee::types::Params;
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    use super::{ForgeServer, NOTIFICATION, RpcResult, SUBSCRIBE, UNSUBSCRIBE};
    use crate::error::{ErrorKind, rpc_error};

    /// A method's params as its struct: an object by name; none (or
    /// `null`) is an empty object, so methods whose params are all
    /// optional may be called without any.
    pub(super) fn parse<P: DeserializeOwned>(method: &str, params: &Params) -> RpcResult<P> {
        let raw = params.as_str().map(str::trim).filter(|s| *s != "null").unwrap_or("{}");
        if !raw.starts_with('{') {
            return Err(rpc_error(
                ErrorKind::InvalidParams,
                format!("{method}: params are passed by name, as a JSON object"),
            ));
        }
        serde_json::from_str(raw)
            .map_err(|e| rpc_error(ErrorKind::InvalidParams, format!("invalid params for {method}: {e}")))
    }

    pub(super) fn register<S, P, R, F, Fut>(
        module: &mut RpcModule<S>,
        name: &'static str,
        handler: F,
    ) -> Result<(), RegisterMethodError>
    where
        S: Send + Sync + 'static,
        P: DeserializeOwned + Send + 'static,
        R: Serialize + Clone + Send + 'static,
        F: Fn(Arc<S>, P) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = RpcResult<R>> + Send,
    {
        module.register_async_method(name, move |params, server, _| {
            let handler = handler.clone();
            async move { handler(server, parse::<P>(name, &params)?).await }
        })?;
        Ok(())
    }

    pub(super) fn register_subscription<S: ForgeServer>(module: &mut RpcModule<S>) -> Result<(), RegisterMethodError> {
        module.register_subscription(
            SUBSCRIBE,
            NOTIFICATION,
            UNSUBSCRIBE,
            |params, pending, server, _| async move {
                match parse(SUBSCRIBE, &params) {
                    Ok(p) => server.session_subscribe(pending, p).await,
                    Err(e) => {
                        pending.reject(e).await;
                        Ok(())
                    }
                }
            },
        )?;
        Ok(())
    }
}

#[cfg(feature = "client")]
mod client {
    use jsonrpsee::core::traits::ToRpcParams;
    use serde::Serialize;
    use serde_json::value::RawValue;

    /// Params sent by name: the struct as a JSON object.
    pub struct ByName<P>(pub P);

    impl<P: Serialize> ToRpcParams for ByName<P> {
        fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
            serde_json::value::to_raw_value(&self.0).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_is_declared_once() {
        let mut names: Vec<&str> = METHODS.iter().map(|m| m.name).collect();
        names.push(SUBSCRIBE);
        let before = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), before);
    }
}
