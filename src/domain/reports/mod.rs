//! What the dashboard and the API report about a newsletter: its figures at a glance and
//! first-week steps (`overview`, the one summary of counts) and the statistics of its sends
//! and audience over time (`stats`). Read-only.

pub mod overview;
pub mod stats;
