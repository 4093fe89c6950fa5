//! `broadsheet tier SUBDOMAIN free|pending|paid`: the operator sets a newsletter's tier (the
//! API cannot; sending needs `paid`).

use std::path::Path;

use super::{Failure, about_subdomain, open_migrated};
use crate::config::TierValue;
use crate::domain::newsletters;

pub(super) fn run(data_dir: &Path, subdomain: &str, tier: TierValue) -> Result<(), Failure> {
    let mut conn = open_migrated(data_dir)?;
    let newsletter = newsletters::set_tier(&mut conn, subdomain, tier.into())
        .map_err(about_subdomain(subdomain))?;
    println!("{}: tier {}", newsletter.subdomain, newsletter.tier);
    Ok(())
}
