//! `broadsheet dkim`: prints the DNS record that publishes the operator's DKIM key, the one
//! `serve --dkim-domain` generated and stores in the database. It reads the domain and
//! selector serve was last started with; `--dkim-domain`/`--dkim-selector` print the record
//! for others (the key is the same).

use std::path::Path;

use super::{EXIT_NOT_FOUND, Failure, open_migrated};
use crate::domain::newsletters::dkim::OperatorKey;

pub(super) fn run(
    data_dir: &Path,
    domain: Option<String>,
    selector: Option<String>,
) -> Result<(), Failure> {
    let Some(mut key) = OperatorKey::load(&open_migrated(data_dir)?)? else {
        return Err(Failure {
            code: EXIT_NOT_FOUND,
            message: "no DKIM key yet: start `broadsheet serve --dkim-domain DOMAIN` once, \
                      it generates the key and keeps it in the database"
                .into(),
        });
    };
    key.domain = domain.unwrap_or(key.domain);
    key.selector = selector.unwrap_or(key.selector);
    println!("{}", key.dns_record()?);
    Ok(())
}
