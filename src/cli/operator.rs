//! `broadsheet operator grant|revoke EMAIL`: makes an account an operator of the
//! installation, or not (the first account of a fresh install already is). Operators see the
//! dashboard's operator page and are mailed the owners' upgrade requests (docs/operator.md).

use std::path::Path;

use clap::Subcommand;

use super::{EXIT_NOT_FOUND, Failure, open_migrated};
use crate::domain::DomainError;
use crate::domain::newsletters::operators;

/// What `operator` does to the account.
#[derive(Debug, Subcommand)]
pub enum OperatorAction {
    /// Make the account of EMAIL an operator.
    Grant {
        /// The account's e-mail address.
        email: String,
    },
    /// Take the operator role from the account of EMAIL.
    Revoke {
        /// The account's e-mail address.
        email: String,
    },
}

pub(super) fn run(data_dir: &Path, action: OperatorAction) -> Result<(), Failure> {
    let (email, operator) = match action {
        OperatorAction::Grant { email } => (email, true),
        OperatorAction::Revoke { email } => (email, false),
    };
    let changed = operators::set_operator(&mut open_migrated(data_dir)?, &email, operator)
        .map_err(|e| match e {
            DomainError::NotFound(_) => Failure {
                code: EXIT_NOT_FOUND,
                message: format!("no account has the e-mail address {email:?}"),
            },
            other => other.into(),
        })?;
    let state = if operator {
        "an operator"
    } else {
        "not an operator"
    };
    let change = if changed { "now" } else { "already" };
    println!("{}: {change} {state}", email.trim());
    Ok(())
}
