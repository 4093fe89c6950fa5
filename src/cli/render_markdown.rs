//! `broadsheet render-markdown` (hidden): Markdown on standard input to HTML on standard
//! output. `serve` renders each issue in such a child process, so a render that overruns its
//! budget can be killed.

use super::{EXIT_FAILURE, Failure};

pub(super) fn run() -> Result<(), Failure> {
    crate::mail::render_budget::child_main().map_err(|e| Failure {
        code: EXIT_FAILURE,
        message: format!("render-markdown: {e}"),
    })
}
