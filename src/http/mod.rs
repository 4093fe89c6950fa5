//! What every door shares on the way in and out over HTTP: the server loop with its read
//! deadlines for slow clients, the headers every answer carries, and method routing whose
//! 405 names the methods a path accepts (docs/security.md, "Response headers" and "Slow
//! clients and uploads").

pub mod headers;
pub mod routing;
pub mod server;
