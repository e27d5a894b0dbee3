//! The conversation tree's methods' params: checkout, rewind, edit,
//! fork, bookmark, delete and split.

use serde::{Deserialize, Serialize};

use super::Addressed;
use super::{is_false, or_default};

params!(
    CheckoutParams {
        session: String,
        pub node: String,
    }
);

params!(
    RewindParams {
        session: String,
        /// Where to go back to (default: before the last turn).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub node: Option<String>,
        /// Leave the conversation.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub files_only: bool,
        /// Leave the files.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub conversation_only: bool,
        /// Change nothing; return the diff.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub dry_run: bool,
        /// Overwrite files changed outside Forge since.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub force: bool,
        /// Go on when some files cannot be restored (otherwise
        /// `rewind_incomplete` names them and nothing is written).
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub partial: bool,
    }
);

params!(
    EditParams {
        session: String,
        pub node: String,
        pub text: String,
    }
);

params!(
    ForkParams {
        session: String,
        /// Where the new session branches off (default: the head).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub node: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// Put back the files tools changed after `node`.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub restore_files: bool,
        /// With `restore_files`: even files changed outside Forge since.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub force: bool,
        /// With `restore_files`: go on when some cannot be restored.
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub partial: bool,
    }
);

params!(
    BookmarkParams {
        session: String,
        pub name: String,
        /// Default: the head.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub node: Option<String>,
        #[serde(default, deserialize_with = "or_default", skip_serializing_if = "is_false")]
        pub delete: bool,
    }
);

params!(
    DeleteNodeParams {
        session: String,
        pub node: String,
        /// Everything under the node goes too (default); `false`: its
        /// children hang from its parent instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cascade: Option<bool>,
    }
);

params!(
    SplitParams {
        session: String,
        pub node: String,
        /// The character to cut at.
        pub at: u64,
    }
);
