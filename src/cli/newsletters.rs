//! `broadsheet newsletters`: every newsletter of the installation with its owner, tier,
//! status and active subscribers, as the dashboard's operator page lists them (newest first),
//! tab-separated under a header line. Read a page at a time through the operator page's own
//! keyset pages, so a long list costs no more per line than a short one.

use std::path::Path;

use super::{Failure, open_migrated};
use crate::domain::newsletters::operators;

pub(super) fn run(data_dir: &Path) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    println!("subdomain\towner\ttier\tstatus\tsubscribers");
    let mut listed = 0;
    let mut cursor = None;
    loop {
        let page = operators::overview(&conn, cursor)?;
        for n in &page.rows {
            println!(
                "{}\t{}\t{}\t{}\t{}",
                n.subdomain, n.owner_email, n.tier, n.status, n.subscribers
            );
        }
        listed += page.rows.len();
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    eprintln!("{listed} newsletter{}", if listed == 1 { "" } else { "s" });
    Ok(())
}
