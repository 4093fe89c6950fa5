//! `broadsheet bounce-token SUBDOMAIN`: where the newsletter's bounces and complaints come
//! back, to configure in an MTA or a provider: its bounce token, the URL that takes reports
//! (`POST /bounces/<token>`), the return paths of its issues (VERP, on the bounce domain) and
//! the pipe command. The same as the dashboard's settings page shows.

use std::path::Path;

use super::{Failure, by_subdomain, open_migrated};
use crate::domain::delivery::verp;

pub(super) fn run(
    data_dir: &Path,
    subdomain: &str,
    base_url: &str,
    bounce_domain: &str,
) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let setup = verp::setup(&conn, &newsletter, base_url, bounce_domain)?;
    println!("token: {}", setup.token);
    println!("url: {}", setup.url);
    println!("return path: {}", setup.return_paths);
    println!("pipe: {}", setup.pipe_command);
    Ok(())
}
