//! What the dashboard and the API report about a newsletter: its figures at a glance and
//! first-week steps (`overview`, the one summary of counts) and the statistics of its sends
//! and audience over time (`stats`), one issue's links and first week (`issue_report`, whose
//! counters the tracking routes keep) and the issues one subscriber received (`received`).

pub mod issue_report;
pub mod overview;
pub mod received;
pub mod stats;
