//! Broadsheet: a self-hostable newsletter publishing service in one binary.
//!
//! Layers, outermost first: `cli` (operator commands) and `app` (the HTTP server, with its
//! connections and response headers in `http`) call `web` (dashboard and account pages),
//! `api` (REST) and `jobs` (background work), which all call the rules in `domain`, which
//! keeps its data through `store` and sends through `mail`.

pub mod api;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod jobs;
pub mod mail;
pub mod site;
pub mod state;
pub mod store;
pub mod web;
pub mod webhooks;
