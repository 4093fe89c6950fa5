//! What every door shares on the way in and out over HTTP: the server loop with its read
//! deadlines for slow clients, the headers every answer carries, compressed text answers, and
//! method routing whose 405 names the methods a path accepts (docs/security.md, "Response
//! headers" and "Slow clients and uploads"); and what the dashboard and the public sites both use: forms, their
//! CSRF tokens, cookies, the client's address and the public page frame (an issue's page,
//! which the dashboard previews). Nothing here imports a door (`api`, `web`, `site`).

pub mod client;
pub mod compression;
pub mod cookies;
pub mod csrf;
pub mod form;
pub mod headers;
pub mod plural;
pub mod public_page;
pub mod routing;
pub mod server;
pub mod signup_form;
