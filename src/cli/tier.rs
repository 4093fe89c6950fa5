//! `broadsheet tier SUBDOMAIN free|pending|paid`: the operator sets a newsletter's tier (the
//! API cannot; sending needs `paid`).

use std::path::Path;

use super::{Failure, open_migrated};
use crate::config::TierValue;
use crate::domain::newsletters;

pub(super) fn run(data_dir: &Path, subdomain: &str, tier: TierValue) -> Result<(), Failure> {
    let newsletter = newsletters::set_tier(&mut open_migrated(data_dir)?, subdomain, tier.into())?;
    println!("{}: tier {}", newsletter.subdomain, newsletter.tier);
    Ok(())
}
