//! The built-in tools.

mod current_date;
mod read_file;
mod run_command;
mod write_file;

use std::sync::Arc;

use super::ToolExecutor;

pub fn all() -> Vec<Arc<dyn ToolExecutor>> {
    vec![
        Arc::new(read_file::ReadFile), Arc::new(write_file::WriteFile),
        Arc::new(run_command::RunCommand),
        Arc::new(current_date::CurrentDate),
    ]
}
