//! `broadsheet bounce SUBDOMAIN`: one DSN or ARF message on standard input (an MTA's pipe
//! transport), applied to the newsletter's subscribers.

use std::io::Read;
use std::path::Path;

use super::{EXIT_FAILURE, EXIT_NOT_A_REPORT, Failure, by_subdomain, open_migrated};
use crate::domain::bounce_report::MAX_REPORT_BYTES;
use crate::domain::tracking;

pub(super) fn run(data_dir: &Path, subdomain: &str) -> Result<(), Failure> {
    // One byte past the cap is enough to know the message is too large.
    let mut raw = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_REPORT_BYTES as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| Failure {
            code: EXIT_FAILURE,
            message: format!("could not read standard input: {e}"),
        })?;
    let mut conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    let applied = tracking::apply_raw_report(
        &mut conn,
        tracking::ReportAbout::Newsletter(newsletter.id),
        &raw,
    )?
    .map_err(|why| Failure {
        code: EXIT_NOT_A_REPORT,
        message: format!("{why}; nothing was changed"),
    })?;
    let lists = [
        ("bounced", &applied.bounced),
        ("soft bounce noted", &applied.soft),
        ("unsubscribed (complaint)", &applied.complained),
        ("not a subscriber, skipped", &applied.unknown),
    ];
    for (what, addresses) in lists {
        for address in addresses {
            println!("{}: {address}: {what}", newsletter.subdomain);
        }
    }
    Ok(())
}
