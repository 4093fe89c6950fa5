//! Broadsheet: a self-hostable newsletter publishing service in one binary.
//!
//! Layers, outermost first: `cli` (operator commands) and `app` (the HTTP server's wiring)
//! mount the doors `web` (dashboard and account pages), `site` (public sites) and `api`
//! (REST), which share `http` (connections, headers, forms, CSRF, the public page frame) and
//! `state`, and start `jobs` (background work, sending through `mail` and `webhooks`). They
//! all call the rules in `domain`, which keeps its data through `store`. The two listeners (the
//! HTTP server in `http`, the bounce listener in `mail`) share `net`'s caps on connections
//! per client. The allowed imports between these modules are a table in `tests/it/layers.rs`.

pub mod api;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod feeds;
pub mod http;
pub mod jobs;
pub mod mail;
pub mod net;
pub mod payments;
pub mod site;
pub mod state;
pub mod store;
pub mod web;
pub mod webhooks;
