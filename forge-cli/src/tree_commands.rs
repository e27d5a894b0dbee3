//! The conversation tree's commands (`tree`, `branches`, `clear`,
//! `checkout`, `rewind`, `undo`, `edit`, `fork`, `bookmark`): their
//! arguments, flattened into forgectl's commands where they always stood,
//! and what each runs in `cmd::tree`.

use clap::Subcommand;

use crate::Global;
use crate::cmd;
use crate::exit::Failure;

#[derive(Subcommand)]
pub(crate) enum TreeCommand {
    /// Draw a session's conversation tree: every branch, the head (*), the
    /// path to it, bookmarks and summaries
    Tree {
        /// Session id, id prefix or name
        session: String,
    },
    /// List where each branch of a session's tree ends
    Branches {
        /// Session id, id prefix or name
        session: String,
    },
    /// Start a session's conversation afresh (the TUI's /clear); refused
    /// while a turn runs. Nothing is deleted: the earlier messages stay in
    /// its tree (`forgectl tree`), and `checkout` goes back to them
    Clear {
        /// Session id, id prefix or name
        session: String,
    },
    /// Move a session's head to another node of its tree; the branch left
    /// stays in the tree
    #[command(after_help = "NODE is a node id, a unique id prefix or a bookmark; `forgectl tree SESSION` lists them.")]
    Checkout {
        /// Session id, id prefix or name
        session: String,
        /// Node id, id prefix or bookmark
        node: String,
        /// Also put the files tools changed back as they were at NODE (as
        /// `rewind` does)
        #[arg(long)]
        restore_files: bool,
        /// With --restore-files: overwrite files changed outside Forge
        #[arg(long, requires = "restore_files")]
        force: bool,
        /// With --restore-files: go on when some files cannot be restored
        #[arg(long, short = 'y', requires = "restore_files")]
        yes: bool,
    },
    /// Put the files tools changed after NODE back as they were there, and
    /// move the head to NODE (the abandoned branch stays in the tree)
    #[command(
        after_help = "Examples:\n  forgectl rewind my-session m06h1 --dry-run   # the diff it would apply\n  forgectl rewind my-session m06h1\n  forgectl rewind my-session m06h1 --files-only\n\nA file changed outside Forge since Forge changed it is a conflict: nothing is written, the files are listed; --force overwrites them (what they held is kept in the store). Git's index, HEAD and refs are never touched."
    )]
    Rewind {
        /// Session id, id prefix or name
        session: String,
        /// Node id, id prefix or bookmark
        node: String,
        /// Restore the files only; the conversation stays where it is
        #[arg(long, conflicts_with = "conversation_only")]
        files_only: bool,
        /// Move the conversation only; the files stay as they are
        #[arg(long)]
        conversation_only: bool,
        /// Print the diff it would apply; change nothing
        #[arg(long)]
        dry_run: bool,
        /// Overwrite files changed outside Forge since Forge changed them
        #[arg(long)]
        force: bool,
        /// Go on when some files cannot be restored (they are named first;
        /// without --yes a terminal asks, a script gets rewind_incomplete)
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Rewind the last turn: its file changes undone, the conversation back
    /// to before it (run it again to go further back)
    #[command(
        after_help = "Files whose content Forge did not record (ignored by .gitignore, over 16 MiB, secrets, or changed by a call cut short) cannot be restored: undo names each with the reason before it writes anything, and asks (--yes goes on; a script without it gets the list, kind rewind_incomplete, exit code 1). --dry-run shows the diff and the same list."
    )]
    Undo {
        /// Session id, id prefix or name
        session: String,
        /// Print the diff it would apply, and what it cannot restore; change nothing
        #[arg(long)]
        dry_run: bool,
        /// Overwrite files changed outside Forge since Forge changed them
        #[arg(long)]
        force: bool,
        /// Go on when some files cannot be restored
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Edit a message: in place when nothing replies to it, else as a new
    /// branch beside it (the original stays); an edited user message is
    /// answered on the new branch
    #[command(
        after_help = "Examples:\n  forgectl edit my-session m06h1 \"use port 8080 instead\"\n  echo \"longer text\" | forgectl edit my-session m06h1 -"
    )]
    Edit {
        /// Session id, id prefix or name
        session: String,
        /// Node id, id prefix or bookmark
        node: String,
        /// The new text, or `-` to read it from stdin
        text: String,
        /// Return once the edit is made, without streaming the answer
        #[arg(long)]
        no_wait: bool,
    },
    /// Start a new session sharing this one's conversation up to NODE
    /// (default: its head); nothing is copied
    Fork {
        /// Session id, id prefix or name
        session: String,
        /// Node id, id prefix or bookmark (default: the head)
        node: Option<String>,
        /// A name for the new session
        #[arg(long)]
        name: Option<String>,
        /// Also put the files tools changed after NODE back as they were
        /// there
        #[arg(long)]
        restore_files: bool,
        /// With --restore-files: overwrite files changed outside Forge
        #[arg(long, requires = "restore_files")]
        force: bool,
        /// With --restore-files: go on when some files cannot be restored
        #[arg(long, short = 'y', requires = "restore_files")]
        yes: bool,
    },
    /// Name a node of a session's tree (default: the head), or --delete a
    /// name; an edit that branches moves the name to the new message
    Bookmark {
        /// Session id, id prefix or name
        session: String,
        /// The bookmark's name
        name: String,
        /// Node id, id prefix or bookmark (default: the head)
        node: Option<String>,
        #[arg(long)]
        delete: bool,
    },
}

impl TreeCommand {
    pub(crate) async fn run(self, g: &Global) -> Result<(), Failure> {
        match self {
            TreeCommand::Tree { session } => cmd::tree::tree(g, &session).await,
            TreeCommand::Branches { session } => cmd::tree::branches(g, &session).await,
            TreeCommand::Clear { session } => cmd::tree::clear(g, &session).await,
            TreeCommand::Checkout { session, node, restore_files: false, .. } => {
                cmd::tree::checkout(g, &session, &node).await
            }
            TreeCommand::Checkout { session, node, restore_files: true, force, yes } => {
                let flags = cmd::tree::RewindFlags { force, yes, ..Default::default() };
                cmd::tree::rewind(g, &session, Some(node), (true, true), flags).await
            }
            TreeCommand::Rewind { session, node, files_only, conversation_only, dry_run, force, yes } => {
                let flags = cmd::tree::RewindFlags { dry_run, force, yes };
                cmd::tree::rewind(g, &session, Some(node), (!conversation_only, !files_only), flags).await
            }
            TreeCommand::Undo { session, dry_run, force, yes } => {
                cmd::tree::rewind(g, &session, None, (true, true), cmd::tree::RewindFlags { dry_run, force, yes }).await
            }
            TreeCommand::Edit { session, node, text, no_wait } => {
                cmd::tree::edit(g, &session, &node, text, no_wait).await
            }
            TreeCommand::Fork { session, node, name, restore_files, force, yes } => {
                cmd::tree::fork(g, &session, node, name, (restore_files, force, yes)).await
            }
            TreeCommand::Bookmark { session, name, node, delete } => {
                cmd::tree::bookmark(g, &session, name, node, delete).await
            }
        }
    }
}
