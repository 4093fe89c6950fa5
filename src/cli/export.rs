//! `broadsheet export SUBDOMAIN`: a newsletter's subscribers as CSV on stdout, streamed.

use std::path::Path;

use super::{Failure, by_subdomain, open_migrated};
use crate::domain::DomainError;
use crate::domain::subscribers::import;
use crate::store::StoreError;

pub(super) fn run(data_dir: &Path, subdomain: &str) -> Result<(), Failure> {
    let conn = open_migrated(data_dir)?;
    let newsletter = by_subdomain(&conn, subdomain)?;
    match import::export_csv(&conn, newsletter.id, std::io::stdout().lock()) {
        Ok(count) => {
            eprintln!("exported {count} subscribers of {}", newsletter.subdomain);
            Ok(())
        }
        // `broadsheet export x | head` closes the pipe early: not a failure.
        Err(DomainError::Store(StoreError::Io(e)))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
