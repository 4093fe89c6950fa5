//! `broadsheet serve`: the web server, the public sites and the job runner (see `app`).

use std::path::Path;

use super::Failure;
use crate::config::ServeArgs;

pub(super) fn run(data_dir: &Path, args: ServeArgs) -> Result<(), Failure> {
    crate::app::serve(data_dir, args).map_err(Failure::from)
}
