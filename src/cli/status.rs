//! `broadsheet status SUBDOMAIN active|paused|cancelled`: pauses, cancels or reactivates a
//! newsletter, whatever its status was.

use std::path::Path;

use clap::ValueEnum;

use super::{Failure, about_subdomain, open_migrated};
use crate::domain::newsletters::{self, Status};

/// A newsletter's status as the operator names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusValue {
    /// Sends as usual.
    Active,
    /// Sending held until it is active again.
    Paused,
    /// Read-only.
    Cancelled,
}

impl From<StatusValue> for Status {
    fn from(value: StatusValue) -> Self {
        match value {
            StatusValue::Active => Status::Active,
            StatusValue::Paused => Status::Paused,
            StatusValue::Cancelled => Status::Cancelled,
        }
    }
}

pub(super) fn run(data_dir: &Path, subdomain: &str, status: StatusValue) -> Result<(), Failure> {
    let mut conn = open_migrated(data_dir)?;
    let newsletter = newsletters::set_status(&mut conn, subdomain, status.into())
        .map_err(about_subdomain(subdomain))?;
    println!("{}: status {}", newsletter.subdomain, newsletter.status);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_value_names_its_domain_status() {
        for value in StatusValue::value_variants() {
            let name = value.to_possible_value().unwrap();
            assert_eq!(Status::from(*value).to_string(), name.get_name());
        }
    }
}
