//! `broadsheet render-markdown [--text]` (hidden): Markdown on standard input to HTML (or the
//! plain text of a mail's text part) on standard output. `serve` renders in such a child
//! process, so a render that overruns its budget can be killed.

use super::{EXIT_FAILURE, Failure};
use crate::domain::content::render_budget::{self, Output};

pub(super) fn run(text: bool) -> Result<(), Failure> {
    let output = if text { Output::Text } else { Output::Html };
    render_budget::child_main(output).map_err(|e| Failure {
        code: EXIT_FAILURE,
        message: format!("render-markdown: {e}"),
    })
}
