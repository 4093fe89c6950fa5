//! `broadsheet bounce-token SUBDOMAIN`: the newsletter's bounce token and the URL that takes
//! its bounce and complaint reports (`POST /bounces/<token>`).

use std::path::Path;

use super::{Failure, by_subdomain, open_migrated};
use crate::domain::newsletters;

pub(super) fn run(data_dir: &Path, subdomain: &str, base_url: &str) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let token = newsletters::bounce_token(&conn, newsletter.id)?;
    println!("token: {token}");
    println!("url: {}/bounces/{token}", base_url.trim_end_matches('/'));
    Ok(())
}
