//! `broadsheet bounce SUBDOMAIN`: one DSN or ARF message on standard input (an MTA's pipe
//! transport), applied to the newsletter's subscribers; or, with `--return-path ADDRESS`, to
//! the delivery that return path (VERP) names, for a transport that takes the whole bounce
//! domain.

use std::io::Read;
use std::path::Path;

use super::{
    EXIT_FAILURE, EXIT_NOT_A_REPORT, EXIT_NOT_FOUND, Failure, by_subdomain, open_migrated,
};
use crate::domain::delivery::bounce_report::MAX_REPORT_BYTES;
use crate::domain::delivery::tracking::{self, ReportAbout};
use crate::domain::delivery::verp::ReturnPaths;
use crate::domain::values::secrets::ServerSecret;

/// What the report is about, as the command line says.
pub(super) enum About<'a> {
    Newsletter(&'a str),
    /// A return path and the bounce domain it must be on.
    ReturnPath(&'a str, &'a str),
}

pub(super) fn run(data_dir: &Path, about: About<'_>) -> Result<(), Failure> {
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
    let (label, about) = match about {
        About::Newsletter(subdomain) => {
            let newsletter = by_subdomain(&conn, subdomain)?;
            (newsletter.subdomain, ReportAbout::Newsletter(newsletter.id))
        }
        About::ReturnPath(address, domain) => {
            let paths = ReturnPaths::new(&ServerSecret::load_or_create(&conn)?, domain);
            let delivery_id = paths.delivery_of(address).ok_or_else(|| Failure {
                code: EXIT_NOT_FOUND,
                message: format!(
                    "{address} is not a return path of {domain} ({}); nothing was changed",
                    paths.pattern()
                ),
            })?;
            (
                format!("delivery {delivery_id}"),
                ReportAbout::Delivery(delivery_id),
            )
        }
    };
    let applied = tracking::apply_raw_report(&mut conn, about, &raw)?.map_err(|why| Failure {
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
            println!("{label}: {address}: {what}");
        }
    }
    Ok(())
}
