//! `broadsheet bounce-token SUBDOMAIN`: where the newsletter's bounces and complaints come
//! back, to configure in an MTA or a provider: its bounce token, the URL that takes reports
//! (`POST /bounces/<token>`), the return paths of its issues (VERP, on the bounce domain) and
//! the pipe command. The same as the dashboard's settings page shows: the base URL and the
//! bounce domain are the server's, as it recorded them in `<data-dir>/listening` at its last
//! start, unless the flags name others.

use std::path::Path;

use super::{BounceDomainArgs, Failure, by_subdomain, open_migrated};
use crate::app::listening::Listening;
use crate::config::DEFAULT_BASE_URL;
use crate::domain::delivery::verp;

pub(super) fn run(
    data_dir: &Path,
    subdomain: &str,
    base_url: Option<&str>,
    domain: &BounceDomainArgs,
) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let served = Listening::read(data_dir);
    let base_url = match (base_url, &served) {
        (Some(given), _) => given.to_string(),
        (None, Some(served)) => served.base_url.clone(),
        (None, None) => {
            eprintln!(
                "no server has started on {} yet and --base-url is not given: the URL starts \
                 with serve's default, {DEFAULT_BASE_URL}",
                data_dir.display()
            );
            DEFAULT_BASE_URL.to_string()
        }
    };
    let bounce_domain = domain.bounce_domain(data_dir);
    let setup = verp::setup(&conn, &newsletter, &base_url, &bounce_domain)?;
    println!("token: {}", setup.token);
    println!("url: {}", setup.url);
    println!("return path: {}", setup.return_paths);
    println!("pipe: {}", setup.pipe_command);
    Ok(())
}
