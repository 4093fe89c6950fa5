//! What the dashboard shows about a newsletter at a glance: its subscriber and issue counts
//! (the newsletter list) and the next steps of its first week (the overview page), each
//! ticked off once done. Read-only; every figure comes from the same tables and counters as
//! the rest of the domain.

use rusqlite::Connection;

use crate::domain::DomainResult;
use crate::domain::issues::Status;

/// A newsletter's figures at a glance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Active subscribers.
    pub subscribers: i64,
    /// Issues not sent yet and not scheduled: drafts and approved ones.
    pub unsent: i64,
    pub scheduled: i64,
    /// Issues sending or sent.
    pub sent: i64,
    /// API keys not revoked.
    pub api_keys: i64,
}

impl Summary {
    pub fn issues(&self) -> i64 {
        self.unsent + self.scheduled + self.sent
    }
}

pub fn summary(conn: &Connection, newsletter_id: i64) -> DomainResult<Summary> {
    let mut summary = Summary {
        subscribers: crate::domain::subscribers::active_count(conn, newsletter_id)?,
        ..Summary::default()
    };
    const BY_STATUS: &str =
        "SELECT status, count(*) FROM issues WHERE newsletter_id = ?1 GROUP BY status";
    let mut stmt = conn.prepare_cached(BY_STATUS)?;
    let rows = stmt.query_map([newsletter_id], |r| Ok((r.get::<_, Status>(0)?, r.get(1)?)))?;
    for row in rows {
        let (status, count): (Status, i64) = row?;
        match status {
            Status::Scheduled => summary.scheduled += count,
            Status::Sending | Status::Sent | Status::Failed => summary.sent += count,
            Status::Draft | Status::Approved => summary.unsent += count,
        }
    }
    const KEYS: &str =
        "SELECT count(*) FROM api_keys WHERE newsletter_id = ?1 AND revoked_at IS NULL";
    summary.api_keys = conn.query_row(KEYS, [newsletter_id], |r| r.get(0))?;
    Ok(summary)
}

/// One step of a new newsletter's first week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    WriteFirstIssue,
    /// Done once someone has subscribed.
    ShareSite,
    CreateApiKey,
}

impl NextStep {
    pub const ALL: [NextStep; 3] = [
        NextStep::WriteFirstIssue,
        NextStep::ShareSite,
        NextStep::CreateApiKey,
    ];

    pub fn done(self, summary: &Summary) -> bool {
        match self {
            NextStep::WriteFirstIssue => summary.issues() > 0,
            NextStep::ShareSite => summary.subscribers > 0,
            NextStep::CreateApiKey => summary.api_keys > 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_done_by_the_figures() {
        let fresh = Summary::default();
        assert!(NextStep::ALL.iter().all(|s| !s.done(&fresh)));
        let busy = Summary {
            subscribers: 1,
            scheduled: 1,
            api_keys: 1,
            ..Summary::default()
        };
        assert!(NextStep::ALL.iter().all(|s| s.done(&busy)));
        assert_eq!(busy.issues(), 1);
    }
}
