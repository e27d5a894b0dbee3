//! The built-in tools.

mod apply_patch;
pub mod current_date;
mod edit;
mod git;
mod git_config;
mod glob;
mod introspect;
pub(crate) mod read_file;
mod recall;
pub mod run_command;
mod search;
pub mod update_context;
pub mod update_plan;
mod web_fetch;
mod write_file;

use std::sync::Arc;

use super::ToolExecutor;

pub fn all() -> Vec<Arc<dyn ToolExecutor>> {
    let mut tools: Vec<Arc<dyn ToolExecutor>> = vec![
        Arc::new(read_file::ReadFile),
        Arc::new(write_file::WriteFile),
        Arc::new(apply_patch::ApplyPatch),
        Arc::new(edit::Edit),
        Arc::new(edit::DeleteFile),
        Arc::new(run_command::RunCommand),
        Arc::new(current_date::CurrentDate),
        Arc::new(introspect::Introspect),
        Arc::new(glob::Glob),
        Arc::new(search::Search),
        Arc::new(web_fetch::WebFetch),
        Arc::new(recall::Recall),
        Arc::new(update_plan::UpdatePlan),
        Arc::new(update_context::UpdateContext),
    ];
    tools.extend(git::all().into_iter().map(|t| Arc::new(t) as Arc<dyn ToolExecutor>));
    tools
}

/// Other names models reach for out of habit: (alias, tool).
pub fn aliases() -> &'static [(&'static str, &'static str)] {
    &[
        ("rg", "search"),
        ("ripgrep", "search"),
        ("grep", "search"),
        ("ugrep", "search"),
        ("ug", "search"),
        ("Glob", "glob"),
        ("Search", "search"),
        ("WebFetch", "web_fetch"),
        ("Edit", "edit"),
        ("str_replace", "edit"),
        ("replace", "edit"),
        ("search_replace", "edit"),
    ]
}
