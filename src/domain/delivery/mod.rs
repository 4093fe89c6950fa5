//! Delivery: getting an issue to its readers and hearing back. `sending` is the send's
//! ledger (recipients recorded once, claimed, settled; resuming a stopped send and sending
//! again to the unconfirmed; `mark_sent` when the last message is settled), `relays` and
//! `send_limits` where and how fast mail may go, `tracking` the opens, clicks, bounces and
//! unsubscribes that come back, `verp` and `bounce_report` how a bounce finds its
//! delivery. The top of the domain: it names issues, subscribers and newsletters; none of
//! them names it.

pub mod bounce_report;
pub mod relays;
pub mod send_limits;
pub mod sending;
pub mod step_tracking;
pub mod tracking;
pub mod verp;
