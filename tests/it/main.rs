//! Integration tests: each starts the real `broadsheet` binary on a random port with a
//! temporary data directory and talks to it as its clients do (HTTP forms, the REST API, an
//! SMTP listener, headless Chromium, the CLI).

mod support;

mod accessibility;
mod account_security;
mod accounts;
mod api_contract;
mod api_errors;
mod api_issues;
mod api_limits;
mod api_newsletter;
mod api_openapi;
mod api_schema_rules;
mod api_snapshot;
mod api_subscribers;
mod bounce_listener;
mod browser;
mod cli_import;
mod content_limits;
mod custom_domains;
mod dash_dents;
mod dash_issues;
mod dash_settings;
mod dash_stats;
mod dash_subscribers;
mod dash_webhooks;
mod data_requests;
mod disk_full;
mod dkim;
mod header_names;
mod http_headers;
mod ids_never_reused;
mod imports;
mod layers;
mod newsletter_relay;
mod operator;
mod operator_role;
mod postfix_relay;
mod publish_on_send;
mod segment_crash;
mod segments;
mod send_faults;
mod sender_domains;
mod sending;
mod sending_crash;
mod site;
mod site_design;
mod slow_clients;
mod smtp_security;
mod sql;
mod stats_recount;
mod test_send;
mod time_zones;
mod webhooks;
mod welcome;
